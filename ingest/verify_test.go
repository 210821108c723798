package ingest_test

import (
	"crypto/hmac"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/ingest"
	"github.com/cikit/cikit/internal/testenv"
)

// The test vector of GitHub's documentation, "Validating webhook
// deliveries" (also quoted in the shared collection's README).
const (
	gitHubVectorSecret    = "It's a Secret to Everybody"
	gitHubVectorBody      = "Hello, World!"
	gitHubVectorSignature = "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17"
)

// The test vector of the Standard Webhooks reference libraries.
const (
	standardVectorSecret    = "whsec_MfKQ9r8GKYqrTwjUPD8ILPZIo2LaLaSw"
	standardVectorID        = "msg_p5jXN8AQM9LWM0D4loKWxJek"
	standardVectorTimestamp = 1614265330
	standardVectorBody      = `{"test": 2432232314}`
	standardVectorSignature = "v1,g0hM9SsE+OTPJTGt/tmIKtSyZlE3uFJELVlNIOLJ1OE="
)

func webhookHeader(kv ...string) http.Header {
	h := http.Header{}
	for i := 0; i < len(kv); i += 2 {
		h.Add(kv[i], kv[i+1])
	}
	return h
}

func newGitHubVerifier(t *testing.T, secrets ...string) *ingest.GitHubVerifier {
	t.Helper()
	v, err := ingest.NewGitHubVerifier(secrets)
	require.NoError(t, err)
	return v
}

func TestGitHubVerifierVector(t *testing.T) {
	t.Parallel()
	v := newGitHubVerifier(t, gitHubVectorSecret)
	require.NoError(t, v.Verify(webhookHeader("X-Hub-Signature-256", gitHubVectorSignature), []byte(gitHubVectorBody)))
	require.Equal(t, gitHubVectorSignature, ingest.SignGitHub(gitHubVectorSecret, []byte(gitHubVectorBody)))
}

// The vector above is the one the shared collection documents.
func TestGitHubVerifierVectorShared(t *testing.T) {
	t.Parallel()
	readme, err := os.ReadFile(filepath.Join(testenv.SharedTestdata(t, "webhooks"), "README.md"))
	require.NoError(t, err)
	for _, s := range []string{"`" + gitHubVectorSecret + "`", "`" + gitHubVectorBody + "`", "X-Hub-Signature-256: `" + gitHubVectorSignature + "`"} {
		require.Contains(t, string(readme), s)
	}
}

func TestGitHubVerifierRefuses(t *testing.T) {
	t.Parallel()
	body, err := os.ReadFile(filepath.Join("testdata", "webhook", "github", "push__branch.json"))
	require.NoError(t, err)
	sig := ingest.SignGitHub(testGitHubSecret, body)

	flipped := []byte(string(body))
	flipped[len(flipped)/2] ^= 0x01
	var parsed any
	require.NoError(t, json.Unmarshal(body, &parsed))
	reserialized, err := json.Marshal(parsed)
	require.NoError(t, err)
	require.NotEqual(t, body, reserialized, "re-serializing changes the bytes")
	sha1Mac := hmac.New(sha1.New, []byte(testGitHubSecret))
	sha1Mac.Write(body)
	sha1Sig := "sha1=" + hex.EncodeToString(sha1Mac.Sum(nil))
	otherDigit := map[byte]byte{'0': '1'}[sig[len(sig)-1]]
	if otherDigit == 0 {
		otherDigit = '0'
	}

	v := newGitHubVerifier(t, testGitHubSecret)
	require.NoError(t, v.Verify(webhookHeader("X-Hub-Signature-256", sig), body))
	for _, tc := range []struct {
		name   string
		header http.Header
		body   []byte
		want   error
	}{
		{"flipped body byte", webhookHeader("X-Hub-Signature-256", sig), flipped, ingest.ErrSignatureMismatch},
		{"re-serialized JSON", webhookHeader("X-Hub-Signature-256", sig), reserialized, ingest.ErrSignatureMismatch},
		{"other last digit", webhookHeader("X-Hub-Signature-256", sig[:len(sig)-1]+string(otherDigit)), body, ingest.ErrSignatureMismatch},
		{"wrong secret", webhookHeader("X-Hub-Signature-256", ingest.SignGitHub("not-the-secret", body)), body, ingest.ErrSignatureMismatch},
		{"sha1= in the SHA-256 header", webhookHeader("X-Hub-Signature-256", sha1Sig), body, ingest.ErrSignatureMismatch},
		{"only the SHA-1 header", webhookHeader("X-Hub-Signature", sha1Sig), body, ingest.ErrMissingSignature},
		{"no header", http.Header{}, body, ingest.ErrMissingSignature},
		{"truncated", webhookHeader("X-Hub-Signature-256", sig[:len(sig)-2]), body, ingest.ErrSignatureMismatch},
		{"too long", webhookHeader("X-Hub-Signature-256", sig+"00"), body, ingest.ErrSignatureMismatch},
		{"not hex", webhookHeader("X-Hub-Signature-256", sig[:len(sig)-1]+"g"), body, ingest.ErrSignatureMismatch},
		{"no prefix", webhookHeader("X-Hub-Signature-256", sig[len("sha256="):]), body, ingest.ErrSignatureMismatch},
		{"empty", webhookHeader("X-Hub-Signature-256", ""), body, ingest.ErrSignatureMismatch},
		{"twice", webhookHeader("X-Hub-Signature-256", sig, "X-Hub-Signature-256", sig), body, ingest.ErrSignatureMismatch},
	} {
		err := v.Verify(tc.header, tc.body)
		require.ErrorIs(t, err, tc.want, tc.name)
		require.NotContains(t, err.Error(), testGitHubSecret, tc.name)
	}
}

func TestGitHubVerifierRotation(t *testing.T) {
	t.Parallel()
	body := []byte(testPushBody)
	v := newGitHubVerifier(t, "old-secret", "new-secret")
	for _, secret := range []string{"old-secret", "new-secret"} {
		require.NoError(t, v.Verify(webhookHeader("X-Hub-Signature-256", ingest.SignGitHub(secret, body)), body), secret)
	}
	err := v.Verify(webhookHeader("X-Hub-Signature-256", ingest.SignGitHub("retired-secret", body)), body)
	require.ErrorIs(t, err, ingest.ErrSignatureMismatch)
	require.EqualError(t, err, "signature mismatch: X-Hub-Signature-256 matches none of the 2 secrets")
}

func TestNewGitHubVerifier(t *testing.T) {
	t.Parallel()
	_, err := ingest.NewGitHubVerifier(nil)
	require.EqualError(t, err, "ingest: at least one GitHub secret is required")
	_, err = ingest.NewGitHubVerifier([]string{"a", ""})
	require.EqualError(t, err, "ingest: GitHub secret 1 is empty")
}

func newGitLabVerifier(t *testing.T, cfg ingest.GitLabVerifierConfig) *ingest.GitLabVerifier {
	t.Helper()
	v, err := ingest.NewGitLabVerifier(cfg)
	require.NoError(t, err)
	return v
}

func TestGitLabVerifierToken(t *testing.T) {
	t.Parallel()
	body := []byte(testGitLabPushBody)
	v := newGitLabVerifier(t, ingest.GitLabVerifierConfig{Tokens: []string{"old-token", "new-token"}})
	for _, token := range []string{"old-token", "new-token"} {
		require.NoError(t, v.Verify(webhookHeader("X-Gitlab-Token", token), body), token)
	}
	for _, tc := range []struct {
		name   string
		header http.Header
		want   error
	}{
		{"other token", webhookHeader("X-Gitlab-Token", "guess"), ingest.ErrSignatureMismatch},
		{"prefix of a token", webhookHeader("X-Gitlab-Token", "new-tok"), ingest.ErrSignatureMismatch},
		{"token and more", webhookHeader("X-Gitlab-Token", "new-token "), ingest.ErrSignatureMismatch},
		{"empty", webhookHeader("X-Gitlab-Token", ""), ingest.ErrSignatureMismatch},
		{"twice", webhookHeader("X-Gitlab-Token", "new-token", "X-Gitlab-Token", "new-token"), ingest.ErrSignatureMismatch},
		{"no header", http.Header{}, ingest.ErrMissingSignature},
	} {
		require.ErrorIs(t, v.Verify(tc.header, body), tc.want, tc.name)
	}
}

func TestGitLabVerifierSigned(t *testing.T) {
	t.Parallel()
	body := []byte(testGitLabPushBody)
	now := time.Unix(1714564800, 0)
	signed := func(token bool, sent time.Time) http.Header {
		h := http.Header{}
		setStandardHeaders(t, h, "b1d5a7c4-0000-4000-8000-000000000001", testGitLabPushBody, testStandardSecret, sent)
		if token {
			h.Set("X-Gitlab-Token", testGitLabToken)
		}
		return h
	}
	clock := func() time.Time { return now }

	onlySigning := newGitLabVerifier(t, ingest.GitLabVerifierConfig{SigningTokens: []string{testStandardSecret}, Now: clock})
	require.NoError(t, onlySigning.Verify(signed(false, now), body))
	require.ErrorIs(t, onlySigning.Verify(webhookHeader("X-Gitlab-Token", testGitLabToken), body), ingest.ErrMissingSignature)
	require.ErrorIs(t, onlySigning.Verify(signed(false, now.Add(-time.Hour)), body), ingest.ErrTimestampOutsideTolerance)

	// Both configured: both required, so a leaked plain token forges nothing.
	both := newGitLabVerifier(t, ingest.GitLabVerifierConfig{
		Tokens: []string{testGitLabToken}, SigningTokens: []string{testStandardSecret}, Now: clock,
	})
	require.NoError(t, both.Verify(signed(true, now), body))
	require.ErrorIs(t, both.Verify(signed(false, now), body), ingest.ErrMissingSignature)
	require.ErrorIs(t, both.Verify(webhookHeader("X-Gitlab-Token", testGitLabToken), body), ingest.ErrMissingSignature)
	tampered := []byte(testGitLabPushBody + " ")
	require.ErrorIs(t, both.Verify(signed(true, now), tampered), ingest.ErrSignatureMismatch)
}

func TestNewGitLabVerifier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  ingest.GitLabVerifierConfig
		want string
	}{
		{ingest.GitLabVerifierConfig{}, "ingest: a GitLab verifier needs Tokens, SigningTokens or both"},
		{ingest.GitLabVerifierConfig{Tokens: []string{""}}, "ingest: GitLab token 0 is empty"},
		{ingest.GitLabVerifierConfig{SigningTokens: []string{"whsec_"}}, "ingest: GitLab signing tokens: ingest: Standard Webhooks secret 0: the secret is empty"},
		{ingest.GitLabVerifierConfig{SigningTokens: []string{testStandardSecret}, Tolerance: -1}, "ingest: GitLab signing tokens: ingest: Tolerance must not be negative, got -1ns"},
	} {
		_, err := ingest.NewGitLabVerifier(tc.cfg)
		require.EqualError(t, err, tc.want)
	}
}

func newStandardVerifier(t *testing.T, now time.Time, tolerance time.Duration, secrets ...string) *ingest.StandardVerifier {
	t.Helper()
	v, err := ingest.NewStandardVerifier(ingest.StandardVerifierConfig{
		Secrets: secrets, Tolerance: tolerance, Now: func() time.Time { return now },
	})
	require.NoError(t, err)
	return v
}

// standardHeader is the header of the Standard Webhooks vector, with
// changes applied as name/value pairs; an empty value removes the header.
func standardHeader(changes ...string) http.Header {
	h := webhookHeader(
		"webhook-id", standardVectorID,
		"webhook-timestamp", strconv.Itoa(standardVectorTimestamp),
		"webhook-signature", standardVectorSignature,
	)
	for i := 0; i < len(changes); i += 2 {
		if changes[i+1] == "" {
			h.Del(changes[i])
		} else {
			h.Set(changes[i], changes[i+1])
		}
	}
	return h
}

func TestStandardVerifierVector(t *testing.T) {
	t.Parallel()
	sent := time.Unix(standardVectorTimestamp, 0)
	v := newStandardVerifier(t, sent, 0, standardVectorSecret)
	require.NoError(t, v.Verify(standardHeader(), []byte(standardVectorBody)))
	sig, err := ingest.SignStandard(standardVectorSecret, standardVectorID, sent, []byte(standardVectorBody))
	require.NoError(t, err)
	require.Equal(t, standardVectorSignature, sig)

	// The whsec_ prefix may be left out.
	bare := newStandardVerifier(t, sent, 0, standardVectorSecret[len("whsec_"):])
	require.NoError(t, bare.Verify(standardHeader(), []byte(standardVectorBody)))
}

func TestStandardVerifierTolerance(t *testing.T) {
	t.Parallel()
	sent := time.Unix(standardVectorTimestamp, 0)
	body := []byte(standardVectorBody)
	for _, tc := range []struct {
		name      string
		skew      time.Duration // of the verifier's clock from the timestamp
		tolerance time.Duration
		want      error
	}{
		{"now", 0, 0, nil},
		{"5m old", ingest.DefaultTolerance, 0, nil},
		{"5m ahead", -ingest.DefaultTolerance, 0, nil},
		{"stale", ingest.DefaultTolerance + time.Second, 0, ingest.ErrTimestampOutsideTolerance},
		{"future", -ingest.DefaultTolerance - time.Second, 0, ingest.ErrTimestampOutsideTolerance},
		{"a day old", 24 * time.Hour, 0, ingest.ErrTimestampOutsideTolerance},
		{"2m old, 1m tolerance", 2 * time.Minute, time.Minute, ingest.ErrTimestampOutsideTolerance},
		{"2m ahead, 1m tolerance", -2 * time.Minute, time.Minute, ingest.ErrTimestampOutsideTolerance},
		{"an hour old, 2h tolerance", time.Hour, 2 * time.Hour, nil},
	} {
		v := newStandardVerifier(t, sent.Add(tc.skew), tc.tolerance, standardVectorSecret)
		err := v.Verify(standardHeader(), body)
		if tc.want == nil {
			require.NoError(t, err, tc.name)
		} else {
			require.ErrorIs(t, err, tc.want, tc.name)
		}
	}
	v := newStandardVerifier(t, sent.Add(-10*time.Minute), 0, standardVectorSecret)
	require.EqualError(t, v.Verify(standardHeader(), body), "timestamp outside tolerance: webhook-timestamp is 10m0s from now, more than 5m0s")
}

func TestStandardVerifierRefuses(t *testing.T) {
	t.Parallel()
	sent := time.Unix(standardVectorTimestamp, 0)
	body := []byte(standardVectorBody)
	v := newStandardVerifier(t, sent, 0, standardVectorSecret)
	valid := standardVectorSignature
	for _, tc := range []struct {
		name   string
		header http.Header
		body   string
		want   error
	}{
		{"no webhook-id", standardHeader("webhook-id", ""), standardVectorBody, ingest.ErrMissingSignature},
		{"no webhook-timestamp", standardHeader("webhook-timestamp", ""), standardVectorBody, ingest.ErrMissingSignature},
		{"no webhook-signature", standardHeader("webhook-signature", ""), standardVectorBody, ingest.ErrMissingSignature},
		{"flipped body byte", standardHeader(), `{"test": 2432232315}`, ingest.ErrSignatureMismatch},
		{"re-serialized JSON", standardHeader(), `{"test":2432232314}`, ingest.ErrSignatureMismatch},
		{"other id", standardHeader("webhook-id", "msg_other"), standardVectorBody, ingest.ErrSignatureMismatch},
		{"other timestamp", standardHeader("webhook-timestamp", strconv.Itoa(standardVectorTimestamp+1)), standardVectorBody, ingest.ErrSignatureMismatch},
		{"truncated", standardHeader("webhook-signature", valid[:len(valid)-4]), standardVectorBody, ingest.ErrSignatureMismatch},
		{"no version", standardHeader("webhook-signature", valid[len("v1,"):]), standardVectorBody, ingest.ErrSignatureMismatch},
		{"other version", standardHeader("webhook-signature", "v2"+valid[len("v1"):]), standardVectorBody, ingest.ErrSignatureMismatch},
		{"asymmetric only", standardHeader("webhook-signature", "v1a"+valid[len("v1"):]), standardVectorBody, ingest.ErrSignatureMismatch},
		{"signed timestamp", standardHeader("webhook-timestamp", "+"+strconv.Itoa(standardVectorTimestamp)), standardVectorBody, ingest.ErrSignatureMismatch},
		{"fractional timestamp", standardHeader("webhook-timestamp", strconv.Itoa(standardVectorTimestamp)+".0"), standardVectorBody, ingest.ErrSignatureMismatch},
		{"timestamp in milliseconds", standardHeader("webhook-timestamp", strconv.Itoa(standardVectorTimestamp)+"000"), standardVectorBody, ingest.ErrTimestampOutsideTolerance},
		{"timestamp out of range", standardHeader("webhook-timestamp", "99999999999999999999"), standardVectorBody, ingest.ErrSignatureMismatch},
	} {
		require.ErrorIs(t, v.Verify(tc.header, []byte(tc.body)), tc.want, tc.name)
	}
	// A dot in the id would make the signed text ambiguous, so it is
	// refused even when signed.
	dotted, err := ingest.SignStandard(standardVectorSecret, "msg.1", sent, body)
	require.NoError(t, err)
	err = v.Verify(standardHeader("webhook-id", "msg.1", "webhook-signature", dotted), body)
	require.EqualError(t, err, "signature mismatch: webhook-id contains a dot")
	// Among others, one valid signature is enough.
	several := "v1,Ceo5qEr07ixe2NLpvHk3FH9bwy/WavXrAFQ/9tdO6mc= v1a,bm90IGEgc2lnbmF0dXJl v1,!! " + valid + " v2," + valid[len("v1,"):]
	require.NoError(t, v.Verify(standardHeader("webhook-signature", several), body))
}

// Rotation works on both sides: a sender signs with an old and a new
// key, a receiver accepts either.
func TestStandardVerifierRotation(t *testing.T) {
	t.Parallel()
	sent := time.Unix(1714564800, 0)
	body := []byte(testDispatchBody)
	oldKey, newKey, otherKey := "whsec_b2xkLWtleS1vbGQta2V5LW9sZC1rZXk=", "whsec_bmV3LWtleS1uZXcta2V5LW5ldy1rZXk=", "whsec_b3RoZXIta2V5LW90aGVyLWtleQ=="
	sign := func(secret string) string {
		sig, err := ingest.SignStandard(secret, "msg_1", sent, body)
		require.NoError(t, err)
		return sig
	}
	header := func(sigs ...string) http.Header {
		h := webhookHeader("webhook-id", "msg_1", "webhook-timestamp", fmt.Sprint(sent.Unix()))
		for i, s := range sigs {
			if i == 0 {
				h.Set("webhook-signature", s)
			} else {
				h.Set("webhook-signature", h.Get("webhook-signature")+" "+s)
			}
		}
		return h
	}
	v := newStandardVerifier(t, sent, 0, oldKey, newKey)
	require.NoError(t, v.Verify(header(sign(oldKey)), body))
	require.NoError(t, v.Verify(header(sign(newKey)), body))
	require.NoError(t, v.Verify(header(sign(otherKey), sign(newKey)), body))
	err := v.Verify(header(sign(otherKey)), body)
	require.EqualError(t, err, "signature mismatch: none of the 1 v1 signatures matches any of the 2 secrets")
}

func TestNewStandardVerifier(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		cfg  ingest.StandardVerifierConfig
		want string
	}{
		{ingest.StandardVerifierConfig{}, "ingest: at least one Standard Webhooks secret is required"},
		{ingest.StandardVerifierConfig{Secrets: []string{"whsec_"}}, "ingest: Standard Webhooks secret 0: the secret is empty"},
		{ingest.StandardVerifierConfig{Secrets: []string{"whsec_%%%"}}, `ingest: Standard Webhooks secret 0: the secret is not "whsec_" and standard base64: illegal base64 data at input byte 0`},
		{ingest.StandardVerifierConfig{Secrets: []string{testStandardSecret}, Tolerance: -time.Minute}, "ingest: Tolerance must not be negative, got -1m0s"},
	} {
		_, err := ingest.NewStandardVerifier(tc.cfg)
		require.EqualError(t, err, tc.want)
	}
	_, err := ingest.SignStandard("whsec_%%%", "msg_1", time.Now(), nil)
	require.Error(t, err)
}

// A GitHub delivery is verified against the secret of its webhook. The
// secret and the body are the test vector of GitHub's documentation.
func ExampleGitHubVerifier() {
	v, err := ingest.NewGitHubVerifier([]string{"It's a Secret to Everybody"})
	if err != nil {
		panic(err)
	}
	h := http.Header{}
	h.Set("X-Hub-Signature-256", "sha256=757107ea0eb2509fc211221cce984b8a37570b6d7586c22c46f4379c8b043e17")
	fmt.Println(v.Verify(h, []byte("Hello, World!")))
	fmt.Println(v.Verify(h, []byte("Hello, World?")))
	// Output:
	// <nil>
	// signature mismatch: X-Hub-Signature-256 matches none of the 1 secrets
}
