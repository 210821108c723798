package secrets_test

import (
	"errors"
	"testing"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/secrets"
)

// FuzzVerify: Verify reads untrusted bytes. Invariants: it never panics;
// every refusal wraps ErrTokenInvalid; and whatever it accepts carries
// the claims of the token the issuer signed — no change of the bytes
// yields other claims that verify.
func FuzzVerify(f *testing.F) {
	b := newOIDC(f, secrets.IssuerConfig{})
	tok, err := b.iss.Issue(f.Context(), pushIdentity(), "aud")
	require.NoError(f, err)
	v := b.iss.Verifier("aud")
	want, err := v.Verify(f.Context(), tok)
	require.NoError(f, err)
	f.Add(tok)
	f.Add(tok[:len(tok)-1])
	f.Add("e30.e30.")
	f.Add("..")
	f.Fuzz(func(t *testing.T, raw string) {
		got, err := v.Verify(t.Context(), raw)
		if err != nil {
			if !errors.Is(err, secrets.ErrTokenInvalid) {
				t.Fatalf("Verify error %v does not wrap ErrTokenInvalid", err)
			}
			return
		}
		require.Equal(t, want, got)
	})
}
