package ingest

import (
	"crypto/hmac"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strings"
	"time"
)

// Verification failures. Every error a verifier returns wraps exactly one
// of them; the wrapped text says what was wrong, for logs. A receiver
// tells the sender only the sentinel's text, so that it learns nothing
// about which secret was tried or how close a forgery came.
var (
	// ErrMissingSignature: the delivery carries no signature or token
	// header of the kind the verifier checks.
	ErrMissingSignature = errors.New("missing signature")
	// ErrSignatureMismatch: a signature or token is present but malformed,
	// or matches none of the configured secrets.
	ErrSignatureMismatch = errors.New("signature mismatch")
	// ErrTimestampOutsideTolerance: a signed timestamp is too far from the
	// verifier's clock, in either direction, so the delivery may be a
	// replay.
	ErrTimestampOutsideTolerance = errors.New("timestamp outside tolerance")
)

// Header names of GitHub and GitLab webhook deliveries.
const (
	headerGitHubSignature = "X-Hub-Signature-256"
	headerGitHubSHA1      = "X-Hub-Signature"
	headerGitLabToken     = "X-Gitlab-Token"
)

// GitHubVerifier checks the X-Hub-Signature-256 header of GitHub
// deliveries: "sha256=" and the hex HMAC-SHA256 of the body, keyed with
// the webhook's secret.
//
// It holds several secrets so that a secret can be rotated without
// refusing deliveries: configure the new one beside the old, change the
// webhook, then drop the old one.
type GitHubVerifier struct {
	secrets [][]byte
}

// NewGitHubVerifier returns a verifier that accepts a delivery signed with
// any of secrets. It refuses an empty list and empty secrets: anyone can
// compute an HMAC with an empty key.
func NewGitHubVerifier(secrets []string) (*GitHubVerifier, error) {
	keys, err := nonEmpty("GitHub secret", secrets)
	if err != nil {
		return nil, err
	}
	return &GitHubVerifier{secrets: keys}, nil
}

// Verify checks that body, exactly as received, carries a valid
// X-Hub-Signature-256 in h. It never parses body. The legacy SHA-1
// X-Hub-Signature alone is refused as ErrMissingSignature: SHA-1 HMACs are
// not accepted.
func (v *GitHubVerifier) Verify(h http.Header, body []byte) error {
	return verifyBody(v.begin, h, body)
}

// begin checks the headers, before any of the body is read, and returns
// the check the body is fed to.
func (v *GitHubVerifier) begin(h http.Header) (bodyCheck, error) {
	values := h.Values(headerGitHubSignature)
	switch {
	case len(values) == 0 && h.Get(headerGitHubSHA1) != "":
		return nil, fmt.Errorf("%w: only the SHA-1 %s was sent, and %s is required", ErrMissingSignature, headerGitHubSHA1, headerGitHubSignature)
	case len(values) == 0:
		return nil, fmt.Errorf("%w: no %s header", ErrMissingSignature, headerGitHubSignature)
	case len(values) > 1:
		return nil, fmt.Errorf("%w: %d %s headers", ErrSignatureMismatch, len(values), headerGitHubSignature)
	}
	digits, ok := strings.CutPrefix(values[0], "sha256=")
	if !ok || len(digits) != hex.EncodedLen(sha256.Size) {
		return nil, fmt.Errorf(`%w: %s is not "sha256=" and %d hex digits`, ErrSignatureMismatch, headerGitHubSignature, hex.EncodedLen(sha256.Size))
	}
	got, err := hex.DecodeString(digits)
	if err != nil {
		return nil, fmt.Errorf("%w: %s is not hex", ErrSignatureMismatch, headerGitHubSignature)
	}
	return newMACCheck(v.secrets, nil, [][]byte{got},
		fmt.Errorf("%w: %s matches none of the %d secrets", ErrSignatureMismatch, headerGitHubSignature, len(v.secrets))), nil
}

// bodyCheck is a verification begun on a delivery's headers and fed its
// body as the body is read: the HMACs are computed while the bytes
// arrive, so that verifying takes no second pass over a large body, and
// a delivery whose headers cannot pass is refused before its body is
// read at all.
type bodyCheck interface {
	io.Writer
	// finish says whether what was written is the body signed.
	finish() error
}

// verifyBody runs a whole check over a body held in memory.
func verifyBody(begin func(http.Header) (bodyCheck, error), h http.Header, body []byte) error {
	c, err := begin(h)
	if err != nil {
		return err
	}
	_, _ = c.Write(body)
	return c.finish()
}

// macCheck computes an HMAC-SHA256 of the body under each key and
// passes when any of them equals any candidate signature.
type macCheck struct {
	macs       []hash.Hash
	candidates [][]byte
	mismatch   error
}

// newMACCheck begins HMACs under keys of prefix and then the body.
func newMACCheck(keys [][]byte, prefix []byte, candidates [][]byte, mismatch error) *macCheck {
	c := &macCheck{candidates: candidates, mismatch: mismatch}
	for _, key := range keys {
		mac := hmac.New(sha256.New, key)
		mac.Write(prefix)
		c.macs = append(c.macs, mac)
	}
	return c
}

func (c *macCheck) Write(p []byte) (int, error) {
	for _, mac := range c.macs {
		mac.Write(p)
	}
	return len(p), nil
}

func (c *macCheck) finish() error {
	match := 0
	for _, mac := range c.macs {
		want := mac.Sum(nil)
		for _, sig := range c.candidates {
			// Every pair is compared, so the time taken does not say
			// which matched.
			match |= subtle.ConstantTimeCompare(want, sig)
		}
	}
	if match != 1 {
		return c.mismatch
	}
	return nil
}

// passCheck is the body check of a verification that its headers
// decided (a GitLab token alone).
type passCheck struct{}

func (passCheck) Write(p []byte) (int, error) { return len(p), nil }
func (passCheck) finish() error               { return nil }

// SignGitHub returns the X-Hub-Signature-256 value GitHub sends for body
// under secret, for tests and for programs that forward deliveries.
func SignGitHub(secret string, body []byte) string {
	return "sha256=" + hex.EncodeToString(hmacSHA256([]byte(secret), body))
}

// GitLabVerifierConfig configures a GitLabVerifier. At least one of Tokens
// and SigningTokens is required; every delivery must pass each kind that
// is configured.
type GitLabVerifierConfig struct {
	// Tokens are the secret tokens GitLab sends in X-Gitlab-Token; any
	// one of them passes.
	Tokens []string
	// SigningTokens are the signing tokens ("whsec_" and base64) of
	// webhooks that sign their deliveries the Standard Webhooks way
	// (webhook-id, webhook-timestamp, webhook-signature); any one of
	// them passes.
	SigningTokens []string
	// Tolerance and Now are as in StandardVerifierConfig, for signed
	// deliveries.
	Tolerance time.Duration
	Now       func() time.Time
}

// GitLabVerifier checks GitLab deliveries: the X-Gitlab-Token header, the
// Standard Webhooks signature of webhooks with a signing token, or both.
//
// When both kinds of secret are configured, a delivery must carry both:
// otherwise whoever learnt a plain token, which travels in every request,
// could send unsigned deliveries. Configure signing tokens once every
// webhook that reaches the verifier has one.
type GitLabVerifier struct {
	tokens  [][sha256.Size]byte // SHA-256 of each token
	signing *StandardVerifier   // nil without signing tokens
}

// NewGitLabVerifier validates cfg and returns a verifier.
func NewGitLabVerifier(cfg GitLabVerifierConfig) (*GitLabVerifier, error) {
	if len(cfg.Tokens) == 0 && len(cfg.SigningTokens) == 0 {
		return nil, errors.New("ingest: a GitLab verifier needs Tokens, SigningTokens or both")
	}
	v := &GitLabVerifier{}
	for i, token := range cfg.Tokens {
		if token == "" {
			return nil, fmt.Errorf("ingest: GitLab token %d is empty", i)
		}
		v.tokens = append(v.tokens, sha256.Sum256([]byte(token)))
	}
	if len(cfg.SigningTokens) > 0 {
		signing, err := NewStandardVerifier(StandardVerifierConfig{
			Secrets:   cfg.SigningTokens,
			Tolerance: cfg.Tolerance,
			Now:       cfg.Now,
		})
		if err != nil {
			return nil, fmt.Errorf("ingest: GitLab signing tokens: %w", err)
		}
		v.signing = signing
	}
	return v, nil
}

// Verify checks the signature, the token, or both, that the verifier was
// configured with. It never parses body.
func (v *GitLabVerifier) Verify(h http.Header, body []byte) error {
	return verifyBody(v.begin, h, body)
}

// begin checks the token and the signature's headers, before any of the
// body is read, and returns the check the body is fed to.
func (v *GitLabVerifier) begin(h http.Header) (bodyCheck, error) {
	var check bodyCheck = passCheck{}
	if v.signing != nil {
		c, err := v.signing.begin(h)
		if err != nil {
			return nil, err
		}
		check = c
	}
	if len(v.tokens) == 0 {
		return check, nil
	}
	values := h.Values(headerGitLabToken)
	switch {
	case len(values) == 0:
		return nil, fmt.Errorf("%w: no %s header", ErrMissingSignature, headerGitLabToken)
	case len(values) > 1:
		return nil, fmt.Errorf("%w: %d %s headers", ErrSignatureMismatch, len(values), headerGitLabToken)
	}
	// Comparing digests, which all have the same length, keeps the
	// comparison from revealing the length of the tokens.
	got := sha256.Sum256([]byte(values[0]))
	match := 0
	for _, want := range v.tokens {
		match |= subtle.ConstantTimeCompare(got[:], want[:])
	}
	if match != 1 {
		return nil, fmt.Errorf("%w: %s matches none of the %d tokens", ErrSignatureMismatch, headerGitLabToken, len(v.tokens))
	}
	return check, nil
}

func hmacSHA256(key []byte, parts ...[]byte) []byte {
	mac := hmac.New(sha256.New, key)
	for _, p := range parts {
		mac.Write(p)
	}
	return mac.Sum(nil)
}

// nonEmpty returns secrets as byte slices, or an error naming what kind
// of secret is missing or empty.
func nonEmpty(kind string, secrets []string) ([][]byte, error) {
	if len(secrets) == 0 {
		return nil, fmt.Errorf("ingest: at least one %s is required", kind)
	}
	keys := make([][]byte, len(secrets))
	for i, s := range secrets {
		if s == "" {
			return nil, fmt.Errorf("ingest: %s %d is empty", kind, i)
		}
		keys[i] = []byte(s)
	}
	return keys, nil
}
