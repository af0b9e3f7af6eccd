package postgres

import (
	"context"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/id"
	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
	"github.com/stint-dev/stint/internal/store/postgres/pgtest"
	"github.com/stint-dev/stint/internal/store/storetest"
)

// testURL returns the database URL of the tests, skipping when none is set.
func testURL(t testing.TB) string { return pgtest.URL(t) }

// newSchema creates an empty schema for one test (see pgtest.NewSchema).
func newSchema(t testing.TB) string { return pgtest.NewSchema(t) }

// openTest opens a store in a fresh schema. It is closed when the test ends, before the
// schema is dropped (clean-ups run last registered, first run).
func openTest(t testing.TB) *Store {
	t.Helper()
	return openURL(t, newSchema(t))
}

func openURL(t testing.TB, u string) *Store {
	t.Helper()
	s, err := Open(context.Background(), Config{URL: u, MaxConns: 8})
	require.NoError(t, err)
	t.Cleanup(func() { _ = s.Close() })
	return s
}

// The store's connections run without JIT, unless the URL asks for it: compiling a generic
// plan whose estimates passed jit_above_cost cost a big store's statements a second each.
func TestJITIsOff(t *testing.T) {
	u := newSchema(t)
	jit := func(s *Store) string {
		var v string
		require.NoError(t, s.pool.QueryRow(context.Background(), `SHOW jit`).Scan(&v))
		return v
	}
	require.Equal(t, "off", jit(openURL(t, u)))
	sep := "?"
	if strings.Contains(u, "?") {
		sep = "&"
	}
	require.Equal(t, "on", jit(openURL(t, u+sep+"jit=on")), "a URL that sets jit keeps its own")
}

func TestConformance(t *testing.T) {
	testURL(t)
	storetest.Run(t, func(t testing.TB) store.Store { return rawStore{openTest(t)} })
}

// rawStore reads the stored bytes for the conformance suite (storetest.RawReader).
type rawStore struct{ *Store }

func (s rawStore) raw(ctx context.Context, query, arg string) ([]byte, error) {
	var b string
	err := s.pool.QueryRow(ctx, query, arg).Scan(&b)
	return []byte(b), err
}

func (s rawStore) RawJobSpec(ctx context.Context, jobID string) ([]byte, error) {
	return s.raw(ctx, `SELECT spec::text FROM jobs WHERE id = $1`, jobID)
}

func (s rawStore) RawWebhookSecret(ctx context.Context, ownerID string) ([]byte, error) {
	return s.raw(ctx, `SELECT secret FROM job_secrets WHERE job_id = $1`, ownerID)
}

func TestConcurrency(t *testing.T) {
	testURL(t)
	t.Parallel()
	storetest.RunConcurrency(t, func(t testing.TB) store.Store { return openTest(t) })
}

func TestOpenRejectsOtherURLs(t *testing.T) {
	t.Parallel()
	for _, u := range []string{"", "sqlite:///tmp/x.db", "mysql://localhost/db", "localhost:5432"} {
		_, err := Open(context.Background(), Config{URL: u})
		require.Error(t, err, u)
	}
}

// TestMigrateConcurrently opens several stores on one empty schema at once, as servers of a
// cluster starting together do: the advisory lock lets one apply the migrations and the
// others find them applied.
func TestMigrateConcurrently(t *testing.T) {
	u := newSchema(t)
	t.Parallel()
	const servers = 5
	stores := make([]*Store, servers)
	errs := make([]error, servers)
	var wg sync.WaitGroup
	for i := range servers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			stores[i], errs[i] = Open(context.Background(), Config{URL: u, MaxConns: 2})
		}()
	}
	wg.Wait()
	for i, err := range errs {
		require.NoError(t, err, "server %d", i)
		t.Cleanup(func() { _ = stores[i].Close() })
	}
	ms, err := loadMigrations()
	require.NoError(t, err)
	var n int
	require.NoError(t, stores[0].pool.QueryRow(context.Background(), `SELECT count(*) FROM schema_migrations`).Scan(&n))
	require.Equal(t, len(ms), n, "each migration applied once")

	// Opening again applies nothing and works.
	openURL(t, u)
}

// TestClusterLease has several stores (servers) on one schema lease at once: no run is
// leased twice, and a queue limit holds across servers.
func TestClusterLease(t *testing.T) {
	u := newSchema(t)
	t.Parallel()
	ctx := context.Background()
	servers := []*Store{openURL(t, u), openURL(t, u), openURL(t, u)}
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	limit := 7
	_, err := servers[1].UpdateQueue(ctx, &store.UpdateQueueParams{Name: "lim", MaxConcurrency: &limit, Now: now})
	require.NoError(t, err)
	for _, q := range []string{model.DefaultQueue, "lim"} {
		var batch []store.NewJob
		for i := range 300 {
			j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Name: fmt.Sprintf("%s-%d", q, i),
				Spec: model.JobSpec{Command: []string{"true"}, Queue: q, Retry: model.RetryPolicy{MaxAttempts: 1}}, Enabled: true, CreatedAt: now, UpdatedAt: now}
			r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: j.Name, Namespace: j.Namespace, Status: model.RunQueued,
				Queue: q, Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 1}
			batch = append(batch, store.NewJob{Job: j, Run: r})
		}
		res, err := servers[2].CreateJobs(ctx, &store.CreateJobsParams{Jobs: batch, Now: now})
		require.NoError(t, err)
		for _, r := range res {
			require.NoError(t, r.Err)
		}
	}

	seen, err := storetest.LeaseUntilEmpty(ctx, []store.Store{servers[0], servers[1], servers[2]}, 12, 9, now)
	require.NoError(t, err)
	require.Len(t, seen, 300+limit, "every run of the default queue, and lim up to its limit")
	q, err := servers[0].GetQueue(ctx, &store.GetQueueParams{Name: "lim"})
	require.NoError(t, err)
	require.Equal(t, limit, q.Depth[model.RunRunning])
}

// TestTranslate checks the mapping of driver errors.
func TestTranslate(t *testing.T) {
	t.Parallel()
	require.NoError(t, translate(nil, "x"))
	err := translate(pgx.ErrNoRows, "get run %s", "r1")
	require.ErrorIs(t, err, model.ErrNotFound)
	require.Contains(t, err.Error(), "get run r1")
}

func TestUniqueViolationIsConflict(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Now()
	_, err := s.pool.Exec(ctx, `INSERT INTO queues (name, created_at, updated_at) VALUES ('q', $1, $1)`, now)
	require.NoError(t, err)
	_, err = s.pool.Exec(ctx, `INSERT INTO queues (name, created_at, updated_at) VALUES ('q', $1, $1)`, now)
	err = translate(err, "insert queue")
	require.ErrorIs(t, err, model.ErrConflict)
	require.Contains(t, err.Error(), "insert queue")
}

// A completion whose dependants were not resolved after it (the statement committed, the
// resolution did not: a crash, or an error) leaves its run in dep_outbox; ResolvePending
// resolves it.
func TestResolvePendingRepairsOutbox(t *testing.T) {
	s := openTest(t)
	t.Parallel()
	ctx := context.Background()
	now := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	mk := func(name string, deps ...model.Dependency) *model.Run {
		j := &model.Job{ID: id.New(now), Namespace: model.DefaultNamespace, Name: name, Enabled: true,
			Spec: model.JobSpec{Handler: "noop", Queue: model.DefaultQueue}, CreatedAt: now, UpdatedAt: now}
		r := &model.Run{ID: id.New(now), JobID: j.ID, JobName: name, Namespace: j.Namespace, Status: model.RunQueued,
			Queue: model.DefaultQueue, Trigger: model.TriggerSubmit, ScheduledFor: now, CreatedAt: now, MaxAttempts: 1, DependsOn: deps}
		res, err := s.CreateJobs(ctx, &store.CreateJobsParams{Jobs: []store.NewJob{{Job: j, Run: r}}, Now: now})
		require.NoError(t, err)
		require.NoError(t, res[0].Err)
		return res[0].Run
	}
	up := mk("up")
	down := mk("down", model.Dependency{RunID: up.ID, Condition: model.CondSucceeded})
	require.Equal(t, model.RunWaiting, down.Status)
	// The end as endSQL writes it, without the resolution that follows it.
	_, err := s.pool.Exec(ctx, `WITH u AS (UPDATE runs SET status = 'succeeded', finished_at = $2 WHERE id = $1 RETURNING id)
		INSERT INTO dep_outbox (run_id) SELECT id FROM u`, up.ID, now)
	require.NoError(t, err)
	got, err := s.GetRun(ctx, &store.GetRunParams{ID: down.ID})
	require.NoError(t, err)
	require.Equal(t, model.RunWaiting, got.Status)

	resolved, err := s.ResolvePending(ctx, &store.ResolvePendingParams{Now: now})
	require.NoError(t, err)
	require.Len(t, resolved, 1)
	require.Equal(t, down.ID, resolved[0].ID)
	got, err = s.GetRun(ctx, &store.GetRunParams{ID: down.ID})
	require.NoError(t, err)
	require.Equal(t, model.RunQueued, got.Status)
	again, err := s.ResolvePending(ctx, &store.ResolvePendingParams{Now: now})
	require.NoError(t, err)
	require.Empty(t, again, "the outbox was emptied")
}

// TestMigrateRefusesNewerSchema opens a schema that a newer stint has migrated (it records a
// version this binary does not know): Open fails naming both versions and changes nothing,
// not even the migrations this binary would otherwise apply.
func TestMigrateRefusesNewerSchema(t *testing.T) {
	testURL(t)
	t.Parallel()
	ms, err := loadMigrations()
	require.NoError(t, err)
	known := ms[len(ms)-1].Version
	const future = 9999

	tests := []struct {
		name    string
		migrate bool   // open a store first, so that the schema is at the newest known version
		prepare string // then run this, which leaves the schema at a future version
	}{
		{
			name:    "migrated schema with a future migration",
			migrate: true,
			// The newest known migration is unrecorded too: it must not be applied.
			prepare: fmt.Sprintf(`DELETE FROM schema_migrations WHERE version = %d;
				INSERT INTO schema_migrations (version, name) VALUES (%d, 'future')`, known, future),
		},
		{
			name: "empty schema marked by a newer stint",
			prepare: fmt.Sprintf(`CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
				applied_at timestamptz NOT NULL DEFAULT now());
				INSERT INTO schema_migrations (version, name) VALUES (%d, 'future')`, future),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			u := newSchema(t)
			if tt.migrate {
				require.NoError(t, openURL(t, u).Close())
			}
			ctx := context.Background()
			conn, err := pgx.Connect(ctx, u)
			require.NoError(t, err)
			defer conn.Close(ctx)
			_, err = conn.Exec(ctx, tt.prepare)
			require.NoError(t, err)
			before := pgSchemaOf(t, conn)

			_, err = Open(ctx, Config{URL: u, MaxConns: 2})
			var newer *store.SchemaNewerError
			require.ErrorAs(t, err, &newer)
			require.Equal(t, store.SchemaNewerError{Database: future, Known: known}, *newer)
			require.ErrorContains(t, err, fmt.Sprintf("database schema is at %04d, this stint knows up to %04d: upgrade stint", future, known))
			require.Equal(t, before, pgSchemaOf(t, conn), "a refused Open changes nothing")
		})
	}
}

// pgSchemaOf returns what a refused migration could change in the connection's schema: its
// tables, columns and indexes and the recorded versions.
func pgSchemaOf(t *testing.T, conn *pgx.Conn) []string {
	t.Helper()
	rows, err := conn.Query(context.Background(), `
		SELECT 'column ' || table_name || '.' || column_name || ' ' || data_type
		  FROM information_schema.columns WHERE table_schema = current_schema()
		UNION ALL
		SELECT 'index ' || indexname || ' ' || indexdef FROM pg_indexes WHERE schemaname = current_schema()
		UNION ALL
		SELECT 'version ' || version || ' ' || name FROM schema_migrations
		ORDER BY 1`)
	require.NoError(t, err)
	out, err := pgx.CollectRows(rows, pgx.RowTo[string])
	require.NoError(t, err)
	return out
}

// TestMigrateCronInstant applies migration 0011 (cron_instant) to a schema holding cron
// runs: they keep their scheduled_for as their instant (storetest.RunInstantMigration). The
// schema is taken back to its state without 0011, which must match the one every other
// migration makes.
func TestMigrateCronInstant(t *testing.T) {
	testURL(t)
	t.Parallel()
	ctx := context.Background()
	ms, err := loadMigrations()
	require.NoError(t, err)
	i := slices.IndexFunc(ms, func(m store.Migration) bool { return strings.HasSuffix(m.Name, "_cron_instant") })
	require.GreaterOrEqual(t, i, 0)
	version := ms[i].Version

	// The schema without 0011, made by the other migrations.
	prior, err := pgx.Connect(ctx, newSchema(t))
	require.NoError(t, err)
	defer prior.Close(ctx)
	_, err = prior.Exec(ctx, `CREATE TABLE schema_migrations (version integer PRIMARY KEY, name text NOT NULL,
		applied_at timestamptz NOT NULL DEFAULT now())`)
	require.NoError(t, err)
	for _, m := range slices.Delete(slices.Clone(ms), i, i+1) {
		_, err = prior.Exec(ctx, m.SQL)
		require.NoError(t, err, m.Name)
		_, err = prior.Exec(ctx, `INSERT INTO schema_migrations (version, name) VALUES ($1, $2)`, m.Version, m.Name)
		require.NoError(t, err)
	}
	// pgSchemaOf, with the schema's own name taken out of index definitions.
	schemaOf := func(conn *pgx.Conn) []string {
		var name string
		require.NoError(t, conn.QueryRow(ctx, `SELECT current_schema()`).Scan(&name))
		out := pgSchemaOf(t, conn)
		for i := range out {
			out[i] = strings.ReplaceAll(out[i], name+".", "")
		}
		return out
	}
	want := schemaOf(prior)

	u := newSchema(t)
	s := openURL(t, u)
	storetest.RunInstantMigration(t, s, func(t *testing.T) store.Store {
		require.NoError(t, s.Close())
		conn, err := pgx.Connect(ctx, u)
		require.NoError(t, err)
		defer conn.Close(ctx)
		// Dropping the column drops the index and the check on it.
		_, err = conn.Exec(ctx, fmt.Sprintf(`DELETE FROM schema_migrations WHERE version = %d;
			ALTER TABLE runs DROP COLUMN instant;
			CREATE UNIQUE INDEX runs_cron_instant ON runs (job_id, scheduled_for) WHERE trigger_kind = 'cron';`, version))
		require.NoError(t, err)
		require.Equal(t, want, schemaOf(conn), "the schema without 0011")
		s = openURL(t, u)
		return s
	}, func(t *testing.T, job *model.Job, runID string, at time.Time) bool {
		// The release before 0011 names no instant column, and lets the unique index
		// refuse a fired instant.
		tag, err := s.pool.Exec(ctx, `INSERT INTO runs (id, job_id, job_name, namespace, status, queue, priority,
			trigger_kind, scheduled_for, created_at, max_attempts)
			VALUES ($1, $2, $3, $4, 'queued', 'default', 0, 'cron', $5, $5, 1) ON CONFLICT DO NOTHING`,
			runID, job.ID, job.Name, job.Namespace, at)
		require.NoError(t, err)
		return tag.RowsAffected() == 1
	})
}
