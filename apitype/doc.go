// Package apitype holds the wire types of stint's REST API and worker protocol: the JSON
// bodies that the server, the CLI, the Go SDK and workers in any language exchange. It
// imports only the standard library. Field names follow the OpenAPI document (internal/api/openapi.json); add fields freely,
// rename none without a version bump.
package apitype
