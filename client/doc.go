// Package client is the Go SDK for stint's REST API (see API.md): submit and manage jobs, watch
// runs and stream their logs, inspect workers and queues. Every method takes a context first
// and speaks the JSON wire types of package apitype.
//
// Error answers of the server are RFC 9457 problem documents; the client returns them as
// *apitype.Problem, so callers can inspect the status and the field errors with errors.As:
//
//	var p *apitype.Problem
//	if errors.As(err, &p) && p.Status == http.StatusNotFound { ... }
//
// Answers that are not problem documents (a proxy's 502, say) come back as *HTTPError;
// StatusCode reads the status from either.
//
// A Client also speaks the worker protocol (register, lease, heartbeat, logs, complete), so it
// implements worker.Server and an agent on another machine can use it to reach the server.
//
// Servers may be https:// URLs: their certificates are verified against the system's roots,
// or the CA bundle of WithTLSConfig (LoadCA reads one), whose config may also carry the client
// certificate a worker proves its id with (mutual TLS).
//
// A Client may be given several servers of one cluster ("http://a:8080,http://b:8080"): it
// sticks to the one that answered last and moves to the next when a server cannot be reached
// or answers 5xx. A request is sent again to another server only when it is certain the first
// never got it (the connection could not be made), or when it is safe to repeat: a read, or
// a call of the worker protocol (a heartbeat or lease poll is asked again; a resent log chunk
// or completion is recognised by its sequence number or fencing token). A 5xx is passed on
// for other calls, and from the last server.
package client
