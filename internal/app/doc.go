// Package app is the composition root: it reads configuration, opens the store engine the
// URL names, and wires the engine, the HTTP API and (for `stint dev`) a local worker into a
// running server. It is the only package that imports concrete store engines.
package app
