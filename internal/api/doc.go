// Package api is stint's HTTP layer: the REST API of API.md, the worker protocol, health,
// readiness, metrics and the OpenAPI document, on a net/http ServeMux.
//
// Handlers decode and validate, call the engine (for every write, so that the engine alone
// decides which of its loops a change wakes) or the store (for plain reads), and encode.
// Every route is declared once, in routeTable, with the permission it needs; a test checks
// that openapi.json describes exactly those routes, and another walks each with every role.
//
// Authentication (auth.go): every route but the open ones needs a bearer token, a stored
// API token (looked up by its SHA-256, cached for a few seconds) or a static one of the
// config, or a client certificate the TLS handshake verified (mutual TLS: a worker bound to
// the certificate's Common Name, as a bound worker token is); the route's permission must be one the token's role holds (internal/auth.Allows),
// else 401 or 403 before the body is read. The principal then rides in the request's
// context: a token scoped to namespaces sees only those (lookups answer 404 as if absent,
// lists are filtered, submissions elsewhere are 403), and a worker token bound to an id
// speaks the worker protocol as that id only (tokens.go serves /v1/tokens).
//
// The worker protocol's routes go through Protocol, which has worker.Server's method set and
// translates between the wire types of apitype and the engine's; the local worker of
// `stint dev` calls the same Protocol in-process. The engine itself knows no wire types.
//
// Bad input never changes anything (invariant 7): a request is decoded strictly (unknown
// fields, wrong types, malformed JSON and trailing data are refused), validated whole, and
// answered with one problem document (RFC 9457) listing every bad field by its JSON path
// (retry.max_attempts, command[0], jobs[3].name) before the engine is called. The routes
// that submit jobs read a spec by hand first (specread.go) and leave to encoding/json, which
// words the errors, every body that reading might not take exactly as it would. Limits
// (limits.go) bound every request the same way on every route; the routes that create jobs
// or runs take a turn of their client's submission rate first (ratelimit.go). Errors become
// HTTP statuses in one function, problemFor: a store that cannot serve (model.ErrUnavailable)
// is a 503 with Retry-After, and /readyz follows whether the store takes writes (ready.go).
//
// POST /v1/jobs/stream (stream.go) is the one route whose request is not read whole: it
// takes any number of job specs as lines, checked each as POST /v1/jobs checks its body,
// commits them in batches as they arrive and answers line by line; a bad line is refused
// alone.
package api
