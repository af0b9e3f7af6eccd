package cli

import (
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestMemoryFlag(t *testing.T) {
	t.Parallel()
	tests := []struct {
		in      string
		want    int64
		wantErr string
	}{
		{in: "512", want: 512},
		{in: "512M", want: 512},
		{in: "512Mi", want: 512},
		{in: "512MiB", want: 512},
		{in: "2G", want: 2048},
		{in: "2gib", want: 2048},
		{in: "1T", want: 1 << 20},
		{in: "1.5G", wantErr: "want an amount of memory"},
		{in: "", wantErr: "want an amount of memory"},
		{in: "G", wantErr: "want an amount of memory"},
		{in: "5K", wantErr: `unknown unit "k"`},
		{in: "-5", wantErr: "want an amount of memory"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			t.Parallel()
			var f MemoryFlag
			err := f.Set(tt.in)
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, f.MB)
			require.Equal(t, strconv.FormatInt(tt.want, 10), f.String(), "in MiB, as --print-config shows it")
		})
	}
}

func TestKVFlag(t *testing.T) {
	t.Parallel()
	var f kvFlag
	raw, err := f.json()
	require.NoError(t, err)
	require.Nil(t, raw, "no pairs: no args object")
	for _, s := range []string{"a=1", "b=", "c=x=y", "a=2"} {
		require.NoError(t, f.Set(s))
	}
	require.Error(t, f.Set("=v"))
	require.Error(t, f.Set("novalue"))
	require.Equal(t, map[string]string{"a": "2", "b": "", "c": "x=y"}, f.m)
	require.Equal(t, "a=2,b=,c=x=y", f.String())
	raw, err = f.json()
	require.NoError(t, err)
	require.JSONEq(t, `{"a":"2","b":"","c":"x=y"}`, string(raw))
}

func TestTimeFlag(t *testing.T) {
	t.Parallel()
	var f timeFlag
	require.Error(t, f.Set("2030-01-02 15:04"))
	require.NoError(t, f.Set("2030-01-02T15:04:05+02:00"))
	require.True(t, f.t.Equal(time.Date(2030, 1, 2, 13, 4, 5, 0, time.UTC)))
}
