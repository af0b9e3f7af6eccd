package storetest

import (
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
	"github.com/stint-dev/stint/internal/store"
)

// token builds a token (not stored) whose hash is derived from name.
func (f *fx) token(name string, role model.Role, mods ...func(*model.Token)) *model.Token {
	tk := &model.Token{ID: f.id(), Name: name, Role: role, Hash: "hash-of-" + name, CreatedAt: at(time.Second)}
	for _, m := range mods {
		m(tk)
	}
	return tk
}

// testTokens checks API tokens: stored as given and found by hash, listed by id, revoked
// once, touched at most once per interval, and the first token created once.
func testTokens(t *testing.T, open OpenFunc) {
	t.Run("CreateFindList", func(t *testing.T) {
		f := setup(t, open)
		list, err := f.s.ListTokens(f.ctx)
		require.NoError(t, err)
		require.Empty(t, list)

		admin := f.token("root", model.RoleAdmin)
		scoped := f.token("ci", model.RoleViewer, func(tk *model.Token) { tk.Namespaces = []string{"reports", "etl"} })
		wk := f.token("w1", model.RoleWorker, func(tk *model.Token) { tk.WorkerID = "w1" })
		for _, tk := range []*model.Token{admin, scoped, wk} {
			created, err := f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: tk})
			require.NoError(t, err)
			require.True(t, created)
		}
		got, err := f.s.FindToken(f.ctx, &store.FindTokenParams{Hash: "hash-of-ci"})
		require.NoError(t, err)
		require.Equal(t, scoped, got, "every field as stored, namespaces in order")
		got, err = f.s.FindToken(f.ctx, &store.FindTokenParams{Hash: "hash-of-w1"})
		require.NoError(t, err)
		require.Equal(t, wk, got)
		require.Nil(t, got.Namespaces, "no namespaces reads back as nil")

		_, err = f.s.FindToken(f.ctx, &store.FindTokenParams{Hash: "nope"})
		require.ErrorIs(t, err, model.ErrNotFound)

		list, err = f.s.ListTokens(f.ctx)
		require.NoError(t, err)
		require.Equal(t, []*model.Token{admin, scoped, wk}, list, "by id")

		dupHash := f.token("root", model.RoleViewer)
		_, err = f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: dupHash})
		require.ErrorIs(t, err, model.ErrConflict, "a hash is one token's")
		dupID := f.token("other", model.RoleViewer, func(tk *model.Token) { tk.ID = admin.ID })
		_, err = f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: dupID})
		require.ErrorIs(t, err, model.ErrConflict, "an id is one token's")
	})

	t.Run("Revoke", func(t *testing.T) {
		f := setup(t, open)
		tk := f.token("ci", model.RoleOperator)
		_, err := f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: tk})
		require.NoError(t, err)
		got, err := f.s.RevokeToken(f.ctx, &store.RevokeTokenParams{ID: tk.ID, Now: at(time.Hour)})
		require.NoError(t, err)
		require.Equal(t, at(time.Hour), *got.RevokedAt)
		got, err = f.s.RevokeToken(f.ctx, &store.RevokeTokenParams{ID: tk.ID, Now: at(2 * time.Hour)})
		require.NoError(t, err)
		require.Equal(t, at(time.Hour), *got.RevokedAt, "the first revocation stands")
		found, err := f.s.FindToken(f.ctx, &store.FindTokenParams{Hash: tk.Hash})
		require.NoError(t, err)
		require.Equal(t, at(time.Hour), *found.RevokedAt, "a revoked token is still found, marked")
		_, err = f.s.RevokeToken(f.ctx, &store.RevokeTokenParams{ID: "missing", Now: at(time.Hour)})
		require.ErrorIs(t, err, model.ErrNotFound)
	})

	t.Run("Touch", func(t *testing.T) {
		f := setup(t, open)
		tk := f.token("ci", model.RoleViewer)
		_, err := f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: tk})
		require.NoError(t, err)
		lastUsed := func() *time.Time {
			t.Helper()
			got, err := f.s.FindToken(f.ctx, &store.FindTokenParams{Hash: tk.Hash})
			require.NoError(t, err)
			return got.LastUsedAt
		}
		require.Nil(t, lastUsed())
		touch := func(now time.Time) {
			t.Helper()
			require.NoError(t, f.s.TouchToken(f.ctx, &store.TouchTokenParams{ID: tk.ID, Now: now, Stale: now.Add(-time.Minute)}))
		}
		touch(at(time.Hour))
		require.Equal(t, at(time.Hour), *lastUsed())
		touch(at(time.Hour + 30*time.Second))
		require.Equal(t, at(time.Hour), *lastUsed(), "within the minute: not written again")
		touch(at(time.Hour + 61*time.Second))
		require.Equal(t, at(time.Hour+61*time.Second), *lastUsed())
		require.NoError(t, f.s.TouchToken(f.ctx, &store.TouchTokenParams{ID: "missing", Now: t0, Stale: t0}))
	})

	t.Run("OnlyIfNone", func(t *testing.T) {
		f := setup(t, open)
		// Servers starting together on one store: one first token between them.
		const n = 4
		var wg sync.WaitGroup
		results := make([]bool, n)
		errs := make([]error, n)
		for i := range n {
			tk := f.token("bootstrap", model.RoleAdmin, func(tk *model.Token) { tk.Hash = tk.ID })
			wg.Add(1)
			go func() {
				defer wg.Done()
				results[i], errs[i] = f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: tk, OnlyIfNone: true})
			}()
		}
		wg.Wait()
		created := 0
		for i := range n {
			require.NoError(t, errs[i])
			if results[i] {
				created++
			}
		}
		require.Equal(t, 1, created)
		list, err := f.s.ListTokens(f.ctx)
		require.NoError(t, err)
		require.Len(t, list, 1)

		// A revoked token still counts: the store is not fresh.
		_, err = f.s.RevokeToken(f.ctx, &store.RevokeTokenParams{ID: list[0].ID, Now: at(time.Hour)})
		require.NoError(t, err)
		ok, err := f.s.CreateToken(f.ctx, &store.CreateTokenParams{Token: f.token("again", model.RoleAdmin), OnlyIfNone: true})
		require.NoError(t, err)
		require.False(t, ok)
	})
}
