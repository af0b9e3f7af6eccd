package id

import (
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestIDsSortByTimeAndAreUnique(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	seen := map[string]bool{}
	prev := ""
	for i := range 1000 {
		s := New(t0.Add(time.Duration(i) * time.Millisecond))
		require.Len(t, s, 26)
		require.False(t, seen[s], "duplicate id %s", s)
		seen[s] = true
		require.Greater(t, s, prev, "ids of later milliseconds sort after earlier ones")
		prev = s
	}
	for range 1000 {
		tok := Token()
		require.Len(t, tok, 26)
		require.False(t, seen[tok])
		seen[tok] = true
	}
}

func TestEncodeKnownValue(t *testing.T) {
	t.Parallel()
	var b [16]byte
	require.Equal(t, "00000000000000000000000000", encode(b))
	b[15] = 31
	require.Equal(t, "0000000000000000000000000z", encode(b))
	b = [16]byte{0x80}
	require.Equal(t, "40000000000000000000000000", encode(b), "the top bit lands in the first character")
}

func TestIDsOfOneMillisecondDifferInTheirRandomBits(t *testing.T) {
	t.Parallel()
	t0 := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	first := New(t0)
	seen := map[string]bool{}
	for range 10000 {
		s := New(t0)
		require.False(t, seen[s], "duplicate id %s", s)
		seen[s] = true
		// 48 bits of time are the first 9.6 characters: the first 9 are the instant's.
		require.Equal(t, first[:9], s[:9])
	}
}

func BenchmarkNew(b *testing.B) {
	t0 := time.Now()
	for b.Loop() {
		_ = New(t0)
	}
}
