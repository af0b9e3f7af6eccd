package model

import (
	"encoding/json"
	"time"
)

// AuditEntry records one change made through the API: who made it, what it was, to what,
// and the object before and after it (as the API shows it: secrets masked).
type AuditEntry struct {
	ID     string
	At     time.Time
	Actor  string // the token's name and id ("ci (01H...)"), "static", or "dev" when the API is open
	Role   Role   // the actor's role ("" when the API is open)
	Action string // "job.create", "queue.update", ...
	Target string // "job:<id>", "queue:<name>", ...
	Before json.RawMessage
	After  json.RawMessage
}
