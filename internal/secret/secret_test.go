package secret

import (
	"encoding/hex"
	"strings"
	"testing"

	"github.com/stretchr/testify/require"
)

func mustParse(t *testing.T, text string) *Keys {
	t.Helper()
	k, err := Parse(text)
	require.NoError(t, err)
	return k
}

func TestSealOpen(t *testing.T) {
	k := mustParse(t, Generate())
	sealed, err := k.Seal("hunter2", "env:DB_PASSWORD")
	require.NoError(t, err)
	require.True(t, Sealed(sealed))
	require.NotContains(t, sealed, "hunter2")
	require.True(t, strings.HasPrefix(sealed, "stint:v1:"+k.ID()+":"), sealed)

	got, err := k.Open(sealed, "env:DB_PASSWORD")
	require.NoError(t, err)
	require.Equal(t, "hunter2", got)

	again, err := k.Seal("hunter2", "env:DB_PASSWORD")
	require.NoError(t, err)
	require.NotEqual(t, sealed, again, "a fresh nonce each time")

	_, err = k.Open(sealed, "env:OTHER")
	require.ErrorContains(t, err, "does not open", "bound to its context")
	tampered := sealed[:len(sealed)-2] + "AA"
	if tampered == sealed {
		tampered = sealed[:len(sealed)-2] + "BB"
	}
	_, err = k.Open(tampered, "env:DB_PASSWORD")
	require.Error(t, err)
	_, err = k.Open("hunter2", "env:DB_PASSWORD")
	require.ErrorIs(t, err, ErrNotSealed)
}

func TestRotation(t *testing.T) {
	oldText, newText := Generate(), Generate()
	old := mustParse(t, oldText)
	sealed, err := old.Seal("v", "c")
	require.NoError(t, err)

	// The new key alone does not open the old value, and says which key it needs.
	_, err = mustParse(t, newText).Open(sealed, "c")
	require.ErrorContains(t, err, "sealed with key "+old.ID())

	// New first, old after: seals with the new key, opens both.
	both := mustParse(t, newText+"\n# the key before\n"+oldText+"\n")
	got, err := both.Open(sealed, "c")
	require.NoError(t, err)
	require.Equal(t, "v", got)
	fresh, err := both.Seal("w", "c")
	require.NoError(t, err)
	require.Contains(t, fresh, ":"+mustParse(t, newText).ID()+":")

	_, err = Parse(newText + "," + newText)
	require.ErrorContains(t, err, "the same key")
}

func TestNoKey(t *testing.T) {
	var k *Keys
	_, err := k.Seal("v", "c")
	require.ErrorIs(t, err, ErrNoKey)
	sealed, err := mustParse(t, Generate()).Seal("v", "c")
	require.NoError(t, err)
	_, err = k.Open(sealed, "c")
	require.ErrorIs(t, err, ErrNoKey)
	require.Empty(t, k.Digest("v"))
	require.Empty(t, k.ID())
}

func TestParse(t *testing.T) {
	raw := make([]byte, KeySize)
	for i := range raw {
		raw[i] = byte(i)
	}
	hexKey := hex.EncodeToString(raw)
	a := mustParse(t, hexKey)
	b := mustParse(t, "  AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=\n") // the same bytes, base64
	require.Equal(t, a.ID(), b.ID())
	require.Equal(t, a.Digest("x"), b.Digest("x"))
	require.NotEqual(t, a.Digest("x"), a.Digest("y"))

	for text, want := range map[string]string{
		"":                   "no key",
		"# only a comment":   "no key",
		"c2hvcnQ=":           "decodes to 5 bytes",
		"not-a-key!":         "neither the hex",
		hexKey[:62] + "zz":   "decodes to 48 bytes",
		hexKey + " c2hvcnQ=": "key 2: decodes to 5 bytes",
	} {
		_, err := Parse(text)
		require.ErrorContains(t, err, want, "%q", text)
	}
}

// BenchmarkSealOpen measures the cost one secret value adds to a submission (Seal) and to
// a lease (Open).
func BenchmarkSealOpen(b *testing.B) {
	k, err := Parse(Generate())
	if err != nil {
		b.Fatal(err)
	}
	value := "a-database-password-of-32-bytes!"
	b.Run("Seal", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Seal(value, "env:DB_PASSWORD"); err != nil {
				b.Fatal(err)
			}
		}
	})
	sealed, err := k.Seal(value, "env:DB_PASSWORD")
	if err != nil {
		b.Fatal(err)
	}
	b.Run("Open", func(b *testing.B) {
		for b.Loop() {
			if _, err := k.Open(sealed, "env:DB_PASSWORD"); err != nil {
				b.Fatal(err)
			}
		}
	})
}
