package api

import (
	"net/http"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/apitype"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/scheduler"
)

// A job shows its effective disruption limit, whether its stored spec names one (jobs made
// through the API) or not (jobs stored before the field), and the two compare equal in
// apply's diff.
func TestMaxDisruptionsOfAStoredSpec(t *testing.T) {
	t.Parallel()
	zero, three := 0, scheduler.DefaultMaxDisruptions
	tests := []struct {
		name string
		max  *int
		want int
	}{
		{"stored before the field", nil, scheduler.DefaultMaxDisruptions},
		{"the default, named", &three, scheduler.DefaultMaxDisruptions},
		{"none", &zero, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got := retryToAPI(model.RetryPolicy{MaxAttempts: 1, MaxDisruptions: tt.max})
			require.NotNil(t, got.MaxDisruptions)
			require.Equal(t, tt.want, *got.MaxDisruptions)
		})
	}
	old := &model.Job{Spec: model.JobSpec{Command: []string{"true"}, Retry: model.RetryPolicy{MaxAttempts: 1}}}
	named := &model.Job{Spec: model.JobSpec{Command: []string{"true"}, Retry: model.RetryPolicy{MaxAttempts: 1, MaxDisruptions: &three}}}
	changes, err := specChanges(old, named)
	require.NoError(t, err)
	require.Empty(t, changes, "nil and the default are the same definition")
}

func TestMaxDisruptionsOverHTTP(t *testing.T) {
	t.Parallel()
	b := setup(t)
	created := b.createJob(t, `{"name": "d", "command": ["true"]}`)
	require.Equal(t, scheduler.DefaultMaxDisruptions, *created.Job.Retry.MaxDisruptions)
	require.Zero(t, created.Run.Disruptions)

	r := b.do(t, "PATCH", "/v1/jobs/d", `{"retry": {"max_disruptions": 0}}`)
	require.Equal(t, http.StatusOK, r.status, "body: %s", r.body)
	var j apitype.Job
	r.decode(t, &j)
	require.Equal(t, 0, *j.Retry.MaxDisruptions)

	r = b.do(t, "GET", "/v1/runs/"+created.Run.ID, nil)
	require.Equal(t, http.StatusOK, r.status)
	require.Contains(t, string(r.body), `"disruptions":0`, "a run always shows its count")
}
