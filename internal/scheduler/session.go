package scheduler

import (
	"fmt"
	"time"
)

// SessionHeld reports whether a worker registering with a new session must be refused
// because its id belongs to a live session: one that heartbeated at or after liveSince (the
// lease TTL ago: its leases may still run). A registration that names that session
// (resume) re-attaches and is never refused; one whose caller proved it is that worker
// (takeover: a token bound to the id, an admin, or the server's own local worker) replaces
// the session, and the old one's attempts end lost. A session silent for longer than the
// lease TTL is over and anyone may take the id.
func SessionHeld(lastHeartbeat, liveSince time.Time, resume, takeover bool) bool {
	return !resume && !takeover && !lastHeartbeat.Before(liveSince)
}

// SessionHeldReason words a refusal of SessionHeld for worker id.
func SessionHeldReason(id string, lastHeartbeat time.Time) string {
	return fmt.Sprintf("worker id %q is in use by a live session (last heartbeat %s)", id, lastHeartbeat.UTC().Format(time.RFC3339Nano))
}
