package api

import (
	"encoding/json"
	"errors"
	"fmt"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/engine"
	"github.com/stint-dev/stint/internal/model"
)

func TestProblemFor(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		err    error
		status int
		field  string
	}{
		{"not found", errors.Join(errors.New("get job"), model.ErrNotFound), 404, ""},
		{"conflict", model.ErrConflict, 409, ""},
		{"invalid state", model.ErrInvalidState, 409, ""},
		{"lease lost", model.ErrLeaseLost, 409, ""},
		{"protocol", fmt.Errorf("log chunks: %w", wireError(invalidField("chunks[0].stream", "must be stdout or stderr"))), 400, "chunks[0].stream"},
		{"protocol unknown worker", wireError(workerNotFound("w1", fmt.Errorf("lease: %w", engine.ErrUnknownWorker))), 404, ""},
		{"fields", invalidField("limit", "bad"), 400, "limit"},
		{"other", errors.New("disk on fire"), 500, ""},
		{"unavailable", fmt.Errorf("create jobs: %w", model.Unavailable("disk full", errors.New("SQLITE_FULL"))), 503, ""},
		{"unavailable in a protocol answer", wireError(fmt.Errorf("complete: %w", model.Unavailable("database unreachable", errors.New("dial")))), 503, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			p := problemFor(tt.err)
			require.Equal(t, tt.status, p.Status)
			require.NotEmpty(t, p.Title)
			if tt.field != "" {
				require.Equal(t, tt.field, p.Errors[0].Field)
			}
			if tt.status == 500 {
				require.NotContains(t, p.Detail, "disk", "internal errors are not shown")
			}
			if tt.status == 503 {
				require.Regexp(t, `^the store is unavailable \((disk full|database unreachable)\); nothing was done`, p.Detail)
				require.NotContains(t, p.Detail, "SQLITE_FULL", "the driver's words are for the log")
				require.Equal(t, unavailableRetryAfter, retryAfter(tt.err, p))
			}
			_, err := json.Marshal(p)
			require.NoError(t, err)
		})
	}
}
