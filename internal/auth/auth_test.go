package auth

import (
	"context"
	"crypto/x509"
	"crypto/x509/pkix"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/stint-dev/stint/internal/model"
)

func TestAllows(t *testing.T) {
	t.Parallel()
	// The roles x actions table of docs/security.md, written out.
	want := map[Perm][]model.Role{
		Open:    {model.RoleAdmin, model.RoleOperator, model.RoleViewer, model.RoleWorker, "", "root"},
		Read:    {model.RoleAdmin, model.RoleOperator, model.RoleViewer},
		Operate: {model.RoleAdmin, model.RoleOperator},
		Admin:   {model.RoleAdmin},
		Worker:  {model.RoleAdmin, model.RoleWorker},
	}
	roles := []model.Role{model.RoleAdmin, model.RoleOperator, model.RoleViewer, model.RoleWorker, "", "root"}
	for _, perm := range []Perm{PermUnset, Open, Read, Operate, Admin, Worker} {
		for _, role := range roles {
			allowed := false
			for _, r := range want[perm] {
				allowed = allowed || r == role
			}
			require.Equal(t, allowed, Allows(role, perm), "%s may %s", role, perm)
		}
	}
	require.Equal(t, "unset", PermUnset.String())
	require.Equal(t, "operate", Operate.String())
}

func TestPrincipal(t *testing.T) {
	t.Parallel()
	all := &Principal{Role: model.RoleViewer}
	scoped := &Principal{Role: model.RoleOperator, Namespaces: []string{"etl", "reports"}}
	require.True(t, all.Sees("anything"))
	require.False(t, all.Scoped())
	require.True(t, scoped.Scoped())
	require.True(t, scoped.Sees("reports"))
	require.False(t, scoped.Sees("default"))

	admin := &Principal{Role: model.RoleAdmin}
	anyWorker := &Principal{Role: model.RoleWorker}
	w1 := &Principal{Role: model.RoleWorker, WorkerID: "w1"}
	for _, tt := range []struct {
		p              *Principal
		id             string
		actsAs, proves bool
	}{
		{admin, "w2", true, true},
		{anyWorker, "w2", true, false},
		{w1, "w1", true, true},
		{w1, "w2", false, false},
		{all, "w1", false, false},
		{scoped, "w1", false, false},
	} {
		require.Equal(t, tt.actsAs, tt.p.ActsAs(tt.id), "%+v acts as %s", tt.p, tt.id)
		require.Equal(t, tt.proves, tt.p.Proves(tt.id), "%+v proves %s", tt.p, tt.id)
	}

	tk := &model.Token{ID: "t1", Name: "ci", Role: model.RoleWorker, WorkerID: "w1", Hash: "h"}
	require.Equal(t, &Principal{TokenID: "t1", Name: "ci", Role: model.RoleWorker, WorkerID: "w1"}, FromToken(tk))

	_, ok := FromContext(context.Background())
	require.False(t, ok)
	got, ok := FromContext(NewContext(context.Background(), w1))
	require.True(t, ok)
	require.Same(t, w1, got)
}

func TestSecrets(t *testing.T) {
	t.Parallel()
	a, err := NewSecret()
	require.NoError(t, err)
	b, err := NewSecret()
	require.NoError(t, err)
	require.NotEqual(t, a, b)
	require.True(t, strings.HasPrefix(a, SecretPrefix))
	require.Len(t, a, len(SecretPrefix)+52, "32 bytes in unpadded base32")
	require.Equal(t, strings.ToLower(a), a)
	require.GreaterOrEqual(t, len(a), MinSecretLen)

	// SHA-256 of "abc" (FIPS 180-2's example).
	require.Equal(t, "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad", Hash("abc"))
	require.NotEqual(t, Hash(a), Hash(b))
}

func TestCheckToken(t *testing.T) {
	t.Parallel()
	require.NoError(t, CheckToken(model.RoleViewer, []string{"etl"}, ""))
	require.NoError(t, CheckToken(model.RoleOperator, []string{"etl"}, ""))
	require.NoError(t, CheckToken(model.RoleWorker, nil, "w1"))
	require.NoError(t, CheckToken(model.RoleAdmin, nil, ""))
	require.ErrorContains(t, CheckToken("root", nil, ""), `role "root"`)
	require.ErrorContains(t, CheckToken(model.RoleAdmin, []string{"etl"}, ""), "namespaces scope operator and viewer tokens only")
	require.ErrorContains(t, CheckToken(model.RoleWorker, []string{"etl"}, "w1"), "namespaces scope")
	require.ErrorContains(t, CheckToken(model.RoleViewer, nil, "w1"), "a worker id binds worker tokens only")
}

// A client certificate is a worker bound to its Common Name: the same rules as a bound
// worker token.
func TestFromCertificate(t *testing.T) {
	t.Parallel()
	p, err := FromCertificate(&x509.Certificate{Subject: pkix.Name{CommonName: "w1", Organization: []string{"etl"}}})
	require.NoError(t, err)
	require.Equal(t, &Principal{Name: "w1", Role: model.RoleWorker, WorkerID: "w1", Certificate: true}, p)
	require.True(t, Allows(p.Role, Worker))
	require.False(t, Allows(p.Role, Read))
	require.True(t, p.ActsAs("w1"))
	require.False(t, p.ActsAs("w2"))
	require.True(t, p.Proves("w1"))
	require.False(t, p.Proves("w2"))
	require.Equal(t, `the client certificate "w1"`, p.Via())
	require.Equal(t, `the token "ci"`, (&Principal{Name: "ci"}).Via())

	_, err = FromCertificate(&x509.Certificate{})
	require.ErrorContains(t, err, "no Common Name")
}
