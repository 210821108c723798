package secrets_test

import (
	"bytes"
	"errors"
	"testing"

	"github.com/cikit/cikit/secrets"
)

func testKey(id string, b byte) secrets.Key {
	return secrets.Key{ID: id, Secret: bytes.Repeat([]byte{b}, secrets.KeyBytes)}
}

func TestKeyringSealOpenRotate(t *testing.T) {
	old, err := secrets.NewKeyring(testKey("k1", 1))
	if err != nil {
		t.Fatal(err)
	}
	s, err := old.Seal([]byte("hunter22"), []byte("repo:acme/api/X"))
	if err != nil || s.KeyID != "k1" || bytes.Contains(s.Ciphertext, []byte("hunter22")) {
		t.Fatalf("Seal = %+v, %v", s, err)
	}
	if _, err := old.Open(s, []byte("repo:acme/api/Y")); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("Open with other aad: %v, want ErrOpen", err)
	}
	s2 := s
	s2.Ciphertext = bytes.Clone(s.Ciphertext)
	s2.Ciphertext[len(s2.Ciphertext)-1] ^= 1
	if _, err := old.Open(s2, []byte("repo:acme/api/X")); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("Open of altered ciphertext: %v, want ErrOpen", err)
	}

	rotated, err := secrets.NewKeyring(testKey("k2", 2), testKey("k1", 1))
	if err != nil {
		t.Fatal(err)
	}
	if p, err := rotated.Open(s, []byte("repo:acme/api/X")); err != nil || string(p) != "hunter22" {
		t.Fatalf("Open after rotation = %q, %v", p, err)
	}
	r, changed, err := rotated.Rewrap(s, []byte("repo:acme/api/X"))
	if err != nil || !changed || r.KeyID != "k2" {
		t.Fatalf("Rewrap = %+v, %v, %v", r, changed, err)
	}
	only, _ := secrets.NewKeyring(testKey("k2", 2))
	if p, err := only.Open(r, []byte("repo:acme/api/X")); err != nil || string(p) != "hunter22" {
		t.Fatalf("Open rewrapped with the new key only = %q, %v", p, err)
	}
	if _, err := only.Open(s, []byte("repo:acme/api/X")); !errors.Is(err, secrets.ErrKeyUnknown) {
		t.Fatalf("Open under a dropped key: %v, want ErrKeyUnknown", err)
	}
	// A key of the same ID but another secret does not open.
	impostor, _ := secrets.NewKeyring(testKey("k1", 9))
	if _, err := impostor.Open(s, []byte("repo:acme/api/X")); !errors.Is(err, secrets.ErrOpen) {
		t.Fatalf("Open with an impostor key: %v, want ErrOpen", err)
	}
}

func TestParseKey(t *testing.T) {
	k, err := secrets.ParseKey("main:" + "AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=")
	if err != nil || k.ID != "main" || len(k.Secret) != 32 {
		t.Fatalf("ParseKey = %+v, %v", k, err)
	}
	for _, bad := range []string{"nokey", "main:short", ":AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE=", "sp ace:AQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQEBAQE="} {
		if _, err := secrets.ParseKey(bad); !errors.Is(err, secrets.ErrInvalid) {
			t.Errorf("ParseKey(%q) = %v, want ErrInvalid", bad, err)
		}
	}
	if _, err := secrets.NewKeyring(testKey("a", 1), testKey("a", 2)); err == nil {
		t.Error("NewKeyring with a duplicate ID: no error")
	}
}

func TestScopes(t *testing.T) {
	for _, s := range []string{"org:acme", "org:acme/platform", "repo:acme/api", "env:acme/api:prod", "env:acme/api:review/x"} {
		sc, err := secrets.ParseScope(s)
		if err != nil || sc.String() != s {
			t.Errorf("ParseScope(%q) = %v, %v", s, sc, err)
		}
	}
	for _, s := range []string{"", "org:", "repo:api", "env:acme/api", "env:acme/api:", "user:x", "repo:../x", "repo:acme/api\n", "org:a b"} {
		if _, err := secrets.ParseScope(s); !errors.Is(err, secrets.ErrInvalid) {
			t.Errorf("ParseScope(%q) = %v, want ErrInvalid", s, err)
		}
	}
	for _, n := range []string{"GITHUB_TOKEN", "1X", "A-B", "", "ci_x"} {
		if secrets.ValidName(n) == nil {
			t.Errorf("ValidName(%q) = nil", n)
		}
	}
	if err := secrets.ValidValue("abc"); !errors.Is(err, secrets.ErrTooShort) {
		t.Errorf("ValidValue(abc) = %v, want ErrTooShort", err)
	}
}
