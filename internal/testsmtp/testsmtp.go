// Package testsmtp is for tests only: an SMTP sink on a local port that accepts every mail
// and hands it to the test, speaking just enough of RFC 5321 for net/smtp.
package testsmtp

import (
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
)

// Mail is one message the sink received.
type Mail struct {
	From string
	To   []string
	Data string // headers and body, as sent (dot-unstuffed)
}

// Sink is a running SMTP sink.
type Sink struct {
	Addr  string    // host:port it listens on
	Mails chan Mail // every mail received, in order
	ln    net.Listener
	wg    sync.WaitGroup
}

// Start listens on 127.0.0.1 and serves until the test ends.
func Start(t testing.TB) *Sink {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("testsmtp: listen: %v", err)
	}
	s := &Sink{Addr: ln.Addr().String(), Mails: make(chan Mail, 100), ln: ln}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			s.wg.Add(1)
			go func() {
				defer s.wg.Done()
				s.serve(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = ln.Close()
		s.wg.Wait()
	})
	return s
}

// serve speaks one SMTP session.
func (s *Sink) serve(c net.Conn) {
	defer c.Close()
	tp := textproto.NewConn(c)
	reply := func(code int, msg string) bool { return tp.PrintfLine("%d %s", code, msg) == nil }
	if !reply(220, "testsmtp ready") {
		return
	}
	var m Mail
	for {
		line, err := tp.ReadLine()
		if err != nil {
			return
		}
		verb := strings.ToUpper(strings.SplitN(line, " ", 2)[0])
		arg := strings.TrimSpace(line[len(verb):])
		switch verb {
		case "EHLO", "HELO":
			reply(250, "testsmtp")
		case "MAIL":
			m = Mail{From: strings.Trim(strings.TrimPrefix(arg, "FROM:"), "<>")}
			reply(250, "ok")
		case "RCPT":
			m.To = append(m.To, strings.Trim(strings.TrimPrefix(arg, "TO:"), "<>"))
			reply(250, "ok")
		case "DATA":
			reply(354, "go on")
			data, err := tp.ReadDotBytes()
			if err != nil {
				return
			}
			m.Data = string(data)
			s.Mails <- m
			reply(250, "queued")
		case "RSET", "NOOP":
			reply(250, "ok")
		case "QUIT":
			reply(221, "bye")
			return
		default:
			reply(502, "not implemented")
		}
	}
}
