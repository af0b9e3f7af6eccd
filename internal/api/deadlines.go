package api

import (
	"net/http"
	"time"
)

// Write deadlines of the routes that outlive a request's usual time.
//
// The server (app) sets http.Server's WriteTimeout so that a client that stops reading
// cannot hold a connection: an answer must be written within WriteTimeout of the request. A
// worker's long poll waits up to 30 s before it answers, and a followed log streams for as
// long as its attempt runs, so those routes call writeWindow before they write: the write
// gets WriteTimeout from now, through http.ResponseController, instead of the server having
// no write timeout at all. (ReadTimeout needs no such care: net/http lifts the read deadline
// once a request's body has been read.)
//
// The deadlines are the network's, so they are read from the wall clock, not the engine's.

// writeWindow sets the write deadline to WriteTimeout from now, when the server has one.
func (a *API) writeWindow(w http.ResponseWriter) {
	if a.cfg.WriteTimeout > 0 {
		_ = http.NewResponseController(w).SetWriteDeadline(time.Now().Add(a.cfg.WriteTimeout)) // not supported: no deadline to move
	}
}
