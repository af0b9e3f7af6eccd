package store

import (
	"errors"
	"os"
	"testing"
	"testing/fstest"

	"github.com/stretchr/testify/require"
)

func TestLoadMigrations(t *testing.T) {
	t.Parallel()
	file := func(s string) *fstest.MapFile { return &fstest.MapFile{Data: []byte(s)} }
	tests := []struct {
		name    string
		fs      fstest.MapFS
		want    []Migration
		wantErr string
	}{
		{
			name: "sorted by version, not by name; other files ignored",
			fs: fstest.MapFS{
				"m/0010_ten.sql":   file("ten"),
				"m/0002_two.sql":   file("two"),
				"m/README.md":      file("doc"),
				"other/0001_x.sql": file("x"),
			},
			want: []Migration{{Version: 2, Name: "0002_two", SQL: "two"}, {Version: 10, Name: "0010_ten", SQL: "ten"}},
		},
		{name: "empty", fs: fstest.MapFS{}, want: []Migration{}},
		{name: "no version", fs: fstest.MapFS{"m/init.sql": file("")}, wantErr: "not NNNN_name.sql"},
		{name: "no name", fs: fstest.MapFS{"m/0001.sql": file("")}, wantErr: "not NNNN_name.sql"},
		{name: "version zero", fs: fstest.MapFS{"m/0000_x.sql": file("")}, wantErr: "not NNNN_name.sql"},
		{
			name:    "shared version",
			fs:      fstest.MapFS{"m/0003_a.sql": file(""), "m/3_b.sql": file("")},
			wantErr: "share version 3",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := LoadMigrations(tt.fs, "m")
			if tt.wantErr != "" {
				require.ErrorContains(t, err, tt.wantErr)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tt.want, got)
		})
	}
}

func TestPendingMigrations(t *testing.T) {
	t.Parallel()
	known := []Migration{{Version: 1, Name: "0001_a"}, {Version: 3, Name: "0003_c"}, {Version: 9, Name: "0009_i"}}
	tests := []struct {
		name    string
		applied []int
		want    []int // versions pending
		newer   *SchemaNewerError
	}{
		{name: "fresh database", applied: nil, want: []int{1, 3, 9}},
		{name: "some applied", applied: []int{1}, want: []int{3, 9}},
		{name: "a gap is filled", applied: []int{1, 9}, want: []int{3}},
		{name: "up to date", applied: []int{1, 3, 9}, want: nil},
		{name: "newer server migrated it", applied: []int{1, 3, 9, 12}, newer: &SchemaNewerError{Database: 12, Known: 9}},
		{name: "newer and behind at once", applied: []int{1, 12}, newer: &SchemaNewerError{Database: 12, Known: 9}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			got, err := PendingMigrations(known, tt.applied)
			if tt.newer != nil {
				var e *SchemaNewerError
				require.True(t, errors.As(err, &e), "err = %v", err)
				require.Equal(t, tt.newer, e)
				require.Nil(t, got, "nothing to apply")
				return
			}
			require.NoError(t, err)
			var versions []int
			for _, m := range got {
				versions = append(versions, m.Version)
			}
			require.Equal(t, tt.want, versions)
		})
	}
}

func TestSchemaNewerErrorNamesBothVersions(t *testing.T) {
	t.Parallel()
	err := &SchemaNewerError{Database: 12, Known: 9}
	require.Equal(t, "database schema is at 0012, this stint knows up to 0009: upgrade stint", err.Error())
}

// TestSchemaVersionIsNewestMigration: SchemaVersion names the newest migration of each
// engine, so a new migration cannot ship without it.
func TestSchemaVersionIsNewestMigration(t *testing.T) {
	t.Parallel()
	for _, engine := range []string{"sqlite", "postgres"} {
		ms, err := LoadMigrations(os.DirFS(engine), "migrations")
		require.NoError(t, err, engine)
		require.NotEmpty(t, ms, engine)
		require.Equal(t, ms[len(ms)-1].Version, SchemaVersion,
			"%s's newest migration is %s: set store.SchemaVersion to it", engine, ms[len(ms)-1].Name)
	}
}
