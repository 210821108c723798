package fleet

import (
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"
)

func TestSignerRejectsForgeries(t *testing.T) {
	t.Parallel()
	old := []byte(strings.Repeat("o", 32))
	s := &signer{keys: [][]byte{[]byte(strings.Repeat("k", 32)), old}}
	tok, err := s.sign(&jobClaims{Kind: kindJob, RunID: "r", JobID: "j", Attempt: 2, Lease: "l", Expires: time.Unix(2e9, 0)})
	require.NoError(t, err)
	var c jobClaims
	require.NoError(t, s.verify(tok, kindJob, &c))
	require.Equal(t, 2, c.Attempt)

	var rc runnerClaims
	require.ErrorIs(t, s.verify(tok, kindRunner, &rc), errBadToken, "a job token is not a runner token")

	body, sig, _ := strings.Cut(tok, ".")
	for name, bad := range map[string]string{
		"no dot":        body + sig,
		"flipped body":  "x" + body[1:] + "." + sig,
		"truncated sig": body + "." + sig[:len(sig)-2],
		"empty":         "",
		"huge":          strings.Repeat("a", 9000) + "." + sig,
	} {
		require.ErrorIs(t, s.verify(bad, kindJob, &c), errBadToken, name)
	}

	// Rotation: a token signed with the old key still verifies; one
	// signed with a key the server does not have does not.
	rotated := &signer{keys: [][]byte{old}}
	tok, err = rotated.sign(&jobClaims{Kind: kindJob})
	require.NoError(t, err)
	require.NoError(t, s.verify(tok, kindJob, &c))
	other := &signer{keys: [][]byte{[]byte(strings.Repeat("x", 32))}}
	require.ErrorIs(t, other.verify(tok, kindJob, &c), errBadToken)
}
