package store

import (
	"fmt"
	"io/fs"
	"path"
	"sort"
	"strconv"
	"strings"
)

// SchemaVersion is the newest schema version this binary knows: the newest migration both
// engines embed (a test checks it against their migrations directories). `stint version`
// and GET /v1/version report it.
const SchemaVersion = 18

// SchemaNewerError is returned (wrapped) by an engine's Open when the database has a
// migration applied that this binary does not know: a newer stint has migrated it. Open then
// changes nothing.
type SchemaNewerError struct {
	Database int // the newest version the database records
	Known    int // the newest version this binary embeds
}

func (e *SchemaNewerError) Error() string {
	return fmt.Sprintf("database schema is at %04d, this stint knows up to %04d: upgrade stint", e.Database, e.Known)
}

// Migration is one embedded schema step of an engine, from a file named NNNN_name.sql.
type Migration struct {
	Version int
	Name    string // the file name without .sql, e.g. 0003_cron
	SQL     string
}

// LoadMigrations reads the files dir/*.sql of fsys (an engine's embedded migrations), each
// named NNNN_name.sql with a positive version NNNN, and returns them by version. Two files
// with one version are an error.
func LoadMigrations(fsys fs.FS, dir string) ([]Migration, error) {
	names, err := fs.Glob(fsys, path.Join(dir, "*.sql"))
	if err != nil {
		return nil, fmt.Errorf("list migrations: %w", err)
	}
	out := make([]Migration, 0, len(names))
	seen := map[int]string{}
	for _, n := range names {
		base := strings.TrimSuffix(path.Base(n), ".sql")
		num, _, ok := strings.Cut(base, "_")
		v, err := strconv.Atoi(num)
		if !ok || err != nil || v <= 0 {
			return nil, fmt.Errorf("migration %s: name is not NNNN_name.sql", n)
		}
		if prev, dup := seen[v]; dup {
			return nil, fmt.Errorf("migrations %s and %s share version %d", prev, n, v)
		}
		seen[v] = n
		b, err := fs.ReadFile(fsys, n)
		if err != nil {
			return nil, fmt.Errorf("read migration %s: %w", n, err)
		}
		out = append(out, Migration{Version: v, Name: base, SQL: string(b)})
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Version < out[j].Version })
	return out, nil
}

// PendingMigrations returns the migrations of known (sorted by version) that applied (the
// versions a database records) lacks, in order. When applied holds a version newer than
// every known one — a newer stint migrated the database — it returns a *SchemaNewerError,
// and the caller must apply nothing.
func PendingMigrations(known []Migration, applied []int) ([]Migration, error) {
	newest := 0
	if len(known) > 0 {
		newest = known[len(known)-1].Version
	}
	done := make(map[int]bool, len(applied))
	dbNewest := 0
	for _, v := range applied {
		done[v] = true
		dbNewest = max(dbNewest, v)
	}
	if dbNewest > newest {
		return nil, &SchemaNewerError{Database: dbNewest, Known: newest}
	}
	var pending []Migration
	for _, m := range known {
		if !done[m.Version] {
			pending = append(pending, m)
		}
	}
	return pending, nil
}
