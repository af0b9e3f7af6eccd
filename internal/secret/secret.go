// Package secret seals the values the server must keep but never store in clear: the
// secret env values of jobs and the webhook secrets of jobs and pipelines. A sealed value is
// text, "stint:v1:<key id>:<base64 of nonce and AES-256-GCM ciphertext>", bound to a context
// string (the env name, the webhook's owner) so that a sealed value copied elsewhere does not
// open. Keys holds the server's current key, which seals, and older keys that still open
// what they sealed; the key id in each value says which key opens it.
package secret

import (
	"crypto/aes"
	"crypto/cipher"
	"crypto/hmac"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"strings"
)

// KeySize is the size of a key in bytes (AES-256).
const KeySize = 32

// prefix starts every sealed value; "v1" is the format (AES-256-GCM, 12-byte nonce).
const prefix = "stint:v1:"

// Errors of Seal and Open.
var (
	// ErrNoKey: the server has no key to seal or open with.
	ErrNoKey = errors.New("the server has no secret key")
	// ErrNotSealed: the value is not in the sealed form.
	ErrNotSealed = errors.New("not a sealed value")
)

// Keys are the server's secret keys: Current seals, and every key opens what it sealed.
// A nil *Keys has no key: Seal and Open fail with ErrNoKey.
type Keys struct {
	current *key
	byID    map[string]*key
}

type key struct {
	id     string
	aead   cipher.AEAD
	digest []byte // the HMAC key of Digest, derived from the key
}

// New returns keys that seal with current and open with current and old.
func New(current []byte, old ...[]byte) (*Keys, error) {
	k := &Keys{byID: map[string]*key{}}
	for i, raw := range append([][]byte{current}, old...) {
		kk, err := newKey(raw)
		if err != nil {
			return nil, fmt.Errorf("key %d: %w", i+1, err)
		}
		if _, dup := k.byID[kk.id]; dup {
			return nil, fmt.Errorf("key %d: the same key as an earlier one (id %s)", i+1, kk.id)
		}
		k.byID[kk.id] = kk
		if i == 0 {
			k.current = kk
		}
	}
	return k, nil
}

func newKey(raw []byte) (*key, error) {
	if len(raw) != KeySize {
		return nil, fmt.Errorf("want %d bytes, got %d", KeySize, len(raw))
	}
	block, err := aes.NewCipher(raw)
	if err != nil {
		return nil, fmt.Errorf("aes: %w", err)
	}
	aead, err := cipher.NewGCM(block)
	if err != nil {
		return nil, fmt.Errorf("gcm: %w", err)
	}
	sum := sha256.Sum256(append([]byte("stint key id\x00"), raw...))
	mac := hmac.New(sha256.New, raw)
	mac.Write([]byte("stint digest key"))
	return &key{id: hex.EncodeToString(sum[:4]), aead: aead, digest: mac.Sum(nil)}, nil
}

// Parse reads keys from text (STINT_SECRET_KEY, or a key file): keys separated by spaces,
// commas or lines, each the hex (64 digits) or base64 of 32 bytes; the first seals, the
// others only open (older keys, kept while values they sealed remain). A '#' starts a comment
// that runs to the end of its line.
func Parse(text string) (*Keys, error) {
	var raws [][]byte
	for line := range strings.Lines(text) {
		line, _, _ = strings.Cut(line, "#")
		for _, f := range strings.FieldsFunc(line, func(r rune) bool { return r == ',' || r == ' ' || r == '\t' || r == '\r' || r == '\n' }) {
			raw, err := decodeKey(f)
			if err != nil {
				return nil, fmt.Errorf("key %d: %w", len(raws)+1, err)
			}
			raws = append(raws, raw)
		}
	}
	if len(raws) == 0 {
		return nil, errors.New("no key: want the hex or base64 of 32 random bytes")
	}
	return New(raws[0], raws[1:]...)
}

// decodeKey reads one key, hex or base64 (standard or URL alphabet, padded or not).
func decodeKey(s string) ([]byte, error) {
	if len(s) == 2*KeySize {
		if b, err := hex.DecodeString(s); err == nil {
			return b, nil
		}
	}
	for _, enc := range []*base64.Encoding{base64.StdEncoding, base64.RawStdEncoding, base64.URLEncoding, base64.RawURLEncoding} {
		if b, err := enc.DecodeString(s); err == nil {
			if len(b) != KeySize {
				return nil, fmt.Errorf("decodes to %d bytes, want %d", len(b), KeySize)
			}
			return b, nil
		}
	}
	return nil, fmt.Errorf("is neither the hex (64 digits) nor the base64 of %d bytes", KeySize)
}

// Generate returns a new random key as base64 text, for a key file or STINT_SECRET_KEY.
func Generate() string {
	b := make([]byte, KeySize)
	_, _ = rand.Read(b) // crypto/rand.Read never fails
	return base64.StdEncoding.EncodeToString(b)
}

// ID is the id of the key that seals ("" without one): the first 8 hex digits of a hash of
// the key, which sealed values carry and logs may show.
func (k *Keys) ID() string {
	if k == nil {
		return ""
	}
	return k.current.id
}

// Seal encrypts plain under the current key, bound to context (Open needs the same).
func (k *Keys) Seal(plain, context string) (string, error) {
	if k == nil {
		return "", ErrNoKey
	}
	c := k.current
	nonce := make([]byte, c.aead.NonceSize())
	_, _ = rand.Read(nonce)
	head := prefix + c.id + ":"
	out := c.aead.Seal(nonce, nonce, []byte(plain), []byte(head+context))
	return head + base64.RawStdEncoding.EncodeToString(out), nil
}

// Open decrypts a value Seal made with the same context, under the key its id names.
func (k *Keys) Open(sealed, context string) (string, error) {
	if !Sealed(sealed) {
		return "", ErrNotSealed
	}
	id, body, _ := strings.Cut(sealed[len(prefix):], ":")
	if k == nil {
		return "", fmt.Errorf("sealed with key %s: %w", id, ErrNoKey)
	}
	c, ok := k.byID[id]
	if !ok {
		return "", fmt.Errorf("sealed with key %s, which the server does not have (it seals with key %s)", id, k.current.id)
	}
	b, err := base64.RawStdEncoding.DecodeString(body)
	if err != nil || len(b) < c.aead.NonceSize() {
		return "", fmt.Errorf("sealed with key %s: malformed", id)
	}
	n := c.aead.NonceSize()
	plain, err := c.aead.Open(nil, b[:n], b[n:], []byte(sealed[:len(prefix)+len(id)+1]+context))
	if err != nil {
		return "", fmt.Errorf("sealed with key %s: does not open (altered, or sealed for another place)", id)
	}
	return string(plain), nil
}

// Sealed reports whether s has the form of a sealed value.
func Sealed(s string) bool { return strings.HasPrefix(s, prefix) }

// Digest is a keyed hash of s (hex HMAC-SHA256 under a key derived from the current key):
// it compares secret values without storing a hash that a guess could be checked against.
// Without a key it is "".
func (k *Keys) Digest(s string) string {
	if k == nil {
		return ""
	}
	m := hmac.New(sha256.New, k.current.digest)
	m.Write([]byte(s))
	return hex.EncodeToString(m.Sum(nil))
}
