package api

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/alerting"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/notify"
	"github.com/stint-dev/stint/internal/store"
)

// maxAuditAnswer caps the answer an audit entry keeps as its After; a larger one (a big
// batch) is recorded as omitted.
const maxAuditAnswer = 256 << 10

// auditNote is what a handler tells the audit log of its change: the target when the path
// does not name it (a new job's id, a job named by name), the object before the change,
// and the object after it when the answer is not it (or carries a secret).
type auditNote struct {
	target        string
	before, after any
	hasAfter      bool
	// commit, on a streaming route, records an entry with after as its After at once.
	commit func(after any)
}

type auditKey struct{}

// noteAudit sets the target (when not empty) and the before of the request's audit entry.
func noteAudit(ctx context.Context, target string, before any) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok {
		if target != "" {
			n.target = target
		}
		if before != nil {
			n.before = before
		}
	}
}

// noteAfter sets the after of the request's audit entry, instead of the answer.
func noteAfter(ctx context.Context, after any) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok {
		n.after, n.hasAfter = after, true
	}
}

// noteCommit records, on a streaming route (route.Stream), an audit entry for a part of the
// request's change that has just committed, with after as its After.
func noteCommit(ctx context.Context, after any) {
	if n, ok := ctx.Value(auditKey{}).(*auditNote); ok && n.commit != nil {
		n.commit(after)
	}
}

// auditWriter holds an audited route's answer until its entry is written.
type auditWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
}

func (w *auditWriter) WriteHeader(status int) {
	if w.status == 0 {
		w.status = status
	}
}

func (w *auditWriter) Write(b []byte) (int, error) {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	return w.body.Write(b)
}

// flush sends the held answer.
func (w *auditWriter) flush() {
	if w.status == 0 {
		w.status = http.StatusOK
	}
	w.ResponseWriter.WriteHeader(w.status)
	_, _ = w.ResponseWriter.Write(w.body.Bytes())
}

// audited runs an audited route's handler: its answer is held, and when it succeeded (2xx)
// its audit entry is queued (Engine.RecordAudit) before the answer goes out. The change has
// committed by then; the entry is written with the others queued at that moment, just
// after, and one that cannot be written is logged.
func (a *API) audited(rt route, w http.ResponseWriter, r *http.Request, handle func(http.ResponseWriter, *http.Request)) {
	note := &auditNote{target: defaultTarget(rt, r)}
	aw := &auditWriter{ResponseWriter: w}
	handle(aw, r.WithContext(context.WithValue(r.Context(), auditKey{}, note)))
	if aw.status/100 == 2 && !dryRun(r) {
		a.recordAudit(r, rt, note, aw.body.Bytes())
	}
	aw.flush()
}

// auditedStream runs a streaming route's handler, which answers as it goes: its answer is
// not held, and the handler records an entry for each part of its change as it commits it
// (noteCommit), so the log has what committed even when the stream stops halfway.
func (a *API) auditedStream(rt route, w http.ResponseWriter, r *http.Request, handle func(http.ResponseWriter, *http.Request)) {
	target := defaultTarget(rt, r)
	note := &auditNote{target: target}
	note.commit = func(after any) {
		a.recordAudit(r, rt, &auditNote{target: target, after: after, hasAfter: true}, nil)
	}
	handle(w, r.WithContext(context.WithValue(r.Context(), auditKey{}, note)))
}

// dryRun reports whether the request only asked what would change.
func dryRun(r *http.Request) bool {
	v, _ := strconv.ParseBool(r.URL.Query().Get("dry_run"))
	return v
}

func (a *API) recordAudit(r *http.Request, rt route, note *auditNote, answer []byte) {
	entry := &model.AuditEntry{Action: rt.Audit, Target: note.target}
	entry.Actor, entry.Role = actorOf(r.Context())
	var err error
	if note.before != nil {
		if entry.Before, err = json.Marshal(note.before); err != nil {
			a.log.Error("audit: encode before", "action", rt.Audit, "err", err)
		}
	}
	switch {
	case note.hasAfter:
		if note.after != nil {
			if entry.After, err = json.Marshal(note.after); err != nil {
				a.log.Error("audit: encode after", "action", rt.Audit, "err", err)
			}
		}
	case rt.AuditSecret:
	case len(answer) > maxAuditAnswer:
		entry.After = json.RawMessage(fmt.Sprintf(`{"omitted": "an answer of %d bytes"}`, len(answer)))
	case json.Valid(answer):
		entry.After = bytes.TrimSpace(answer)
	}
	if err := a.eng.RecordAudit(context.WithoutCancel(r.Context()), entry); err != nil {
		a.log.Error("audit entry not queued", "action", entry.Action, "target", entry.Target, "actor", entry.Actor, "err", err)
	}
}

// defaultTarget names what a route changes from its path: its first segment after /v1/
// (singular) and the path's id or name ("job:<id as given>", "queue:default").
func defaultTarget(rt route, r *http.Request) string {
	kind, _, _ := strings.Cut(strings.TrimPrefix(rt.Path, "/v1/"), "/")
	kind = strings.TrimSuffix(kind, "s")
	for _, v := range []string{"id", "name"} {
		if s := r.PathValue(v); s != "" && strings.Contains(rt.Path, "{"+v+"}") {
			if kind == "pipeline" && v == "id" { // /v1/pipelines/{name}/runs/{id}
				return "pipeline_run:" + s
			}
			if kind == "hook" {
				kind = "job"
				if strings.HasPrefix(rt.Path, "/v1/hooks/pipelines/") {
					kind = "pipeline"
				}
			}
			return kind + ":" + s
		}
	}
	return kind
}

// actorOf names who made a request: a stored token by name and id, a static token or a
// client certificate by name, "dev" when authentication is off, and "webhook" for a
// signed webhook (no principal).
func actorOf(ctx context.Context) (string, model.Role) {
	p := principalOf(ctx)
	switch {
	case p == nil:
		return "webhook", ""
	case p.TokenID == "" && p.Name == openPrincipal().Name:
		return "dev", ""
	case p.TokenID != "":
		return fmt.Sprintf("%s (%s)", p.Name, p.TokenID), p.Role
	}
	return p.Name, p.Role
}

// listAudit answers GET /v1/audit?target=&actor=&before=&limit=.
func (a *API) listAudit(w http.ResponseWriter, r *http.Request) error {
	if err := unscoped(r.Context(), "the audit log"); err != nil {
		return err
	}
	q := r.URL.Query()
	limit, errs := a.limitParam(q)
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	entries, err := a.store.ListAudit(r.Context(), &store.ListAuditParams{Target: q.Get("target"), Actor: q.Get("actor"),
		Before: q.Get("before"), Limit: limit})
	if err != nil {
		return fmt.Errorf("list audit: %w", err)
	}
	out := apitype.AuditList{Entries: make([]*apitype.AuditEntry, 0, len(entries))}
	for _, e := range entries {
		out.Entries = append(out.Entries, &apitype.AuditEntry{ID: e.ID, At: e.At.UTC(), Actor: e.Actor, Role: string(e.Role),
			Action: e.Action, Target: e.Target, Before: e.Before, After: e.After})
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}

// listAlerts answers GET /v1/alerts?state=firing|resolved&before=&limit=.
func (a *API) listAlerts(w http.ResponseWriter, r *http.Request) error {
	q := r.URL.Query()
	limit, errs := a.limitParam(q)
	state := alerting.State(q.Get("state"))
	if state != "" && state != alerting.Firing && state != alerting.Resolved {
		errs = append(errs, apitype.FieldError{Field: "state", Message: "must be firing or resolved"})
	}
	if len(errs) > 0 {
		return invalidFields(errs)
	}
	alerts, err := a.store.ListAlerts(r.Context(), &store.ListAlertsParams{State: state, Before: q.Get("before"), Limit: limit})
	if err != nil {
		return fmt.Errorf("list alerts: %w", err)
	}
	out := apitype.AlertList{Alerts: make([]*apitype.Alert, 0, len(alerts))}
	for _, al := range alerts {
		wire := notify.Wire(al, "")
		out.Alerts = append(out.Alerts, &wire)
	}
	writeJSON(w, http.StatusOK, out)
	return nil
}
