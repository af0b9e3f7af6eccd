package engine

import (
	"context"
	"fmt"
	"time"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// auditQueue bounds the audit entries waiting to be written: past it, RecordAudit waits
// (an overloaded store slows the API down rather than losing entries).
const auditQueue = 4096

// auditWriteTimeout bounds one write of audit entries.
const auditWriteTimeout = 5 * time.Second

// RecordAudit queues an entry of the audit log, giving it its id and time, and returns
// without waiting for its write: one goroutine (writeAudits) writes the queue in order, as
// many entries as are waiting in one transaction, so that auditing a request costs it no
// transaction of its own. It waits only while the queue is full.
func (e *Engine) RecordAudit(ctx context.Context, entry *model.AuditEntry) error {
	entry.At = e.clock.Now()
	entry.ID = e.cfg.NewID(entry.At)
	select {
	case <-e.stop: // a select below with room in the queue could pick either
		return fmt.Errorf("record audit: %w", errStopped)
	default:
	}
	select {
	case e.audits <- entry:
		return nil
	case <-e.stop:
		return fmt.Errorf("record audit: %w", errStopped)
	case <-ctx.Done():
		return fmt.Errorf("record audit: %w", ctx.Err())
	}
}

// writeAudits writes queued audit entries until ctx ends, then writes what is still
// queued. A write begins AuditLinger after the previous one at the earliest, unless a
// whole batch waits or ctx ends.
func (e *Engine) writeAudits(ctx context.Context) {
	var last time.Time
	for {
		select {
		case <-ctx.Done():
			for batch := e.auditBatch(nil); len(batch) > 0; batch = e.auditBatch(nil) {
				e.appendAudits(ctx, batch)
			}
			return
		case entry := <-e.audits:
			if d := last.Add(e.cfg.AuditLinger).Sub(e.clock.Now()); d > 0 && len(e.audits) < e.cfg.MaxBatch {
				t := e.clock.NewTimer(d)
				select {
				case <-t.C():
				case <-ctx.Done():
					t.Stop()
				}
			}
			last = e.clock.Now()
			e.appendAudits(ctx, e.auditBatch(entry))
		}
	}
}

// auditBatch returns first (when not nil) and the entries queued behind it, at most
// MaxBatch.
func (e *Engine) auditBatch(first *model.AuditEntry) []*model.AuditEntry {
	var batch []*model.AuditEntry
	if first != nil {
		batch = append(batch, first)
	}
	for len(batch) < e.cfg.MaxBatch {
		select {
		case entry := <-e.audits:
			batch = append(batch, entry)
		default:
			return batch
		}
	}
	return batch
}

// appendAudits writes a batch, and once more after a second unless the engine stops
// meanwhile. A write is not cut short by the engine's stop (Stop waits for it, at most
// auditWriteTimeout): entries it cannot write are logged with what they were.
func (e *Engine) appendAudits(running context.Context, batch []*model.AuditEntry) {
	write := func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(running), auditWriteTimeout)
		defer cancel()
		return e.store.AppendAudit(ctx, &store.AppendAuditParams{Entries: batch})
	}
	err := write()
	if err != nil && running.Err() == nil {
		t := e.clock.NewTimer(time.Second)
		select {
		case <-t.C():
			err = write()
		case <-running.Done():
			t.Stop()
		}
	}
	if err != nil {
		for _, entry := range batch {
			e.log.Error("audit entry not written", "action", entry.Action, "target", entry.Target,
				"actor", entry.Actor, "at", entry.At, "err", err)
		}
	}
}
