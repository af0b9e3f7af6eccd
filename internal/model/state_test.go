package model

import "testing"

func TestRunStatus(t *testing.T) {
	t.Parallel()
	tests := []struct {
		s            RunStatus
		valid, final bool
	}{
		{RunWaiting, true, false},
		{RunScheduled, true, false},
		{RunQueued, true, false},
		{RunRunning, true, false},
		{RunSucceeded, true, true},
		{RunFailed, true, true},
		{RunCancelled, true, true},
		{RunSkipped, true, true},
		{"frozen", false, false},
		{"", false, false},
	}
	for _, tt := range tests {
		if got := tt.s.Valid(); got != tt.valid {
			t.Errorf("%q.Valid() = %v, want %v", tt.s, got, tt.valid)
		}
		if got := tt.s.Final(); got != tt.final {
			t.Errorf("%q.Final() = %v, want %v", tt.s, got, tt.final)
		}
		if got := tt.s.Active(); got != (tt.valid && !tt.final) {
			t.Errorf("%q.Active() = %v", tt.s, got)
		}
	}
	for _, s := range []AttemptStatus{AttemptSucceeded, AttemptFailed, AttemptTimedOut, AttemptLost, AttemptCancelled} {
		if !s.Valid() {
			t.Errorf("%q should be a valid outcome", s)
		}
	}
	if AttemptRunning.Valid() || AttemptStatus("done").Valid() {
		t.Error("running and unknown words are not outcomes a worker may report")
	}
}
