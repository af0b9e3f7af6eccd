package app

import (
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"
)

// connGuard caps a server's connections, through http.Server.ConnState:
//
//   - at most maxConns open at once (0: no cap), so a flood cannot run the process out of
//     file descriptors;
//   - at most maxPending per remote IP that have not yet sent a whole request header (0: no
//     cap). That is what a slowloris client holds: 2,000 half-sent requests from one
//     address keep at most maxPending connections, each for at most ReadHeaderTimeout,
//     while that address's connections that have sent a request (a worker's keep-alive
//     connection, a proxy's) are not counted.
//
// A connection over a cap is closed as soon as it is accepted, before a byte of it is read.
type connGuard struct {
	maxConns, maxPending int
	log                  *slog.Logger

	mu       sync.Mutex
	accepted int // ever
	open     int
	pending  map[string]int      // remote IP -> connections not yet past a request header
	waiting  map[net.Conn]string // those connections -> their IP
	refused  int                 // since the last log line
	loggedAt time.Time
}

// refusedLogEvery spaces the log lines about refused connections: a flood logs one line per
// this, with the count.
const refusedLogEvery = 10 * time.Second

func newConnGuard(maxConns, maxPending int, log *slog.Logger) *connGuard {
	return &connGuard{maxConns: maxConns, maxPending: maxPending, log: log,
		pending: make(map[string]int), waiting: make(map[net.Conn]string)}
}

// connState is the http.Server's ConnState hook.
func (g *connGuard) connState(c net.Conn, s http.ConnState) {
	switch s {
	case http.StateNew:
		if why := g.admit(c); why != "" {
			_ = c.Close() // the server's goroutine for it reads nothing and ends (StateClosed)
			g.noteRefused(c, why)
		}
	case http.StateActive, http.StateIdle:
		g.mu.Lock()
		g.passed(c)
		g.mu.Unlock()
	case http.StateClosed, http.StateHijacked:
		g.mu.Lock()
		g.passed(c)
		g.open--
		g.mu.Unlock()
	}
}

// admit counts a new connection and says why it is over a cap ("" when it is not).
func (g *connGuard) admit(c net.Conn) string {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.accepted++
	g.open++
	if g.maxConns > 0 && g.open > g.maxConns {
		return "too many connections"
	}
	if g.maxPending > 0 {
		ip := remoteIP(c)
		g.waiting[c] = ip
		g.pending[ip]++
		if g.pending[ip] > g.maxPending {
			return "too many connections from one address waiting for their request header"
		}
	}
	return ""
}

// acceptedSoFar is how many connections the server has accepted, refused ones included.
func (g *connGuard) acceptedSoFar() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.accepted
}

// passed uncounts c as waiting for its first request header. The caller holds g.mu.
func (g *connGuard) passed(c net.Conn) {
	ip, ok := g.waiting[c]
	if !ok {
		return
	}
	delete(g.waiting, c)
	if g.pending[ip]--; g.pending[ip] <= 0 {
		delete(g.pending, ip)
	}
}

// noteRefused logs refused connections, one line per refusedLogEvery at most.
func (g *connGuard) noteRefused(c net.Conn, why string) {
	g.mu.Lock()
	g.refused++
	now := time.Now()
	if now.Sub(g.loggedAt) < refusedLogEvery {
		g.mu.Unlock()
		return
	}
	n := g.refused
	g.refused, g.loggedAt = 0, now
	g.mu.Unlock()
	g.log.Warn("connections refused", "count", n, "last_from", remoteIP(c), "reason", why,
		"max_conns", g.maxConns, "max_pending_per_ip", g.maxPending)
}

// remoteIP is the address a connection comes from, without its port.
func remoteIP(c net.Conn) string {
	addr := c.RemoteAddr().String()
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return addr
	}
	return host
}
