package scheduler

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

func TestBackfillInstants(t *testing.T) {
	t.Parallel()
	now := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	sec := func(s int) time.Time { return now.Add(time.Duration(s) * time.Second) }
	tests := []struct {
		name             string
		expr             string
		anchor, from, to time.Time
		limit            int
		want             []time.Time
		more             bool
	}{
		{name: "@every on the grid of its anchor, before it too", expr: "@every 10s", anchor: sec(3), from: sec(-30), to: sec(-5), limit: 10,
			want: []time.Time{sec(-27), sec(-17), sec(-7)}},
		{name: "@every with the anchor before the range", expr: "@every 10s", anchor: sec(-103), from: sec(-30), to: sec(-10), limit: 10,
			want: []time.Time{sec(-23), sec(-13)}},
		{name: "from on the grid is included", expr: "@every 10s", anchor: sec(3), from: sec(-17), to: sec(-17), limit: 10,
			want: []time.Time{sec(-17)}},
		{name: "stops at now", expr: "@every 10s", anchor: sec(3), from: sec(-20), to: sec(60), limit: 10,
			want: []time.Time{sec(-17), sec(-7)}},
		{name: "an instant at now is listed", expr: "* * * * *", from: sec(-60), to: sec(60), limit: 10,
			want: []time.Time{sec(-60), now}},
		{name: "calendar", expr: "*/20 * * * * *", from: sec(-50), to: sec(-10), limit: 10,
			want: []time.Time{sec(-40), sec(-20)}},
		{name: "a range after now is empty", expr: "* * * * *", from: sec(60), to: sec(600), limit: 10},
		{name: "limit", expr: "@every 1s", anchor: now, from: sec(-10), to: now, limit: 3,
			want: []time.Time{sec(-10), sec(-9), sec(-8)}, more: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, more := BackfillInstants(mustParse(t, tt.expr, "UTC"), tt.anchor, tt.from, tt.to, now, tt.limit)
			require.Equal(t, tt.want, got)
			require.Equal(t, tt.more, more)
		})
	}
}

func TestGridAnchor(t *testing.T) {
	t.Parallel()
	created := time.Date(2030, 1, 1, 12, 0, 0, 0, time.UTC)
	next := created.Add(time.Hour)
	fired := []time.Time{created.Add(time.Minute), created.Add(2 * time.Minute)}
	require.Equal(t, next, GridAnchor(&model.Job{CreatedAt: created, NextFireAt: &next}, fired), "the next fire first")
	require.Equal(t, fired[1], GridAnchor(&model.Job{CreatedAt: created}, fired), "then the newest fired instant")
	require.Equal(t, created, GridAnchor(&model.Job{CreatedAt: created}, nil), "then the creation")
}
