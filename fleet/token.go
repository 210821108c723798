package fleet

import (
	"crypto/hmac"
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/cikit/cikit/secrets"
)

// errBadToken is every token that does not verify; callers answer 401
// without saying more.
var errBadToken = errors.New("invalid token")

// signer signs and verifies the server's tokens: base64url(JSON claims)
// "." base64url(HMAC-SHA256 of the first part). The first key signs; any
// key verifies, so keys can be rotated.
type signer struct {
	keys [][]byte
}

// runnerClaims are a runner token's.
type runnerClaims struct {
	Kind     string    `json:"k"` // "runner"
	RunnerID string    `json:"id"`
	Name     string    `json:"n"`
	Labels   []string  `json:"l"`
	Issued   time.Time `json:"iat"`
}

// jobClaims are a job token's: the attempt and lease it fences.
type jobClaims struct {
	Kind     string    `json:"k"` // "job"
	RunID    string    `json:"r"`
	JobID    string    `json:"j"`
	Attempt  int       `json:"a"`
	Lease    string    `json:"l"`
	RunnerID string    `json:"n"`
	Expires  time.Time `json:"exp"`
	// Repository is the repository of the job's run
	// (cikit.RunContext.Repository), "" when its run has none: what
	// Server.AuthorizeFetch lets the token fetch.
	Repository string `json:"repo,omitempty"`
	// Secrets says the attempt was handed a secrets token at its claim:
	// only such an attempt can hold dynamic secrets, so only its
	// heartbeats and its end ask the broker to renew and revoke them
	// (each a read of the lease store).
	Secrets bool `json:"s,omitempty"`
	// Identity is the job's identity, in an ID token request token
	// (kind "idreq"), for the ID tokens it mints.
	Identity *secrets.Identity `json:"id,omitempty"`
}

const (
	kindRunner = "runner"
	kindJob    = "job"
)

func (s *signer) sign(claims any) (string, error) {
	b, err := json.Marshal(claims)
	if err != nil {
		return "", fmt.Errorf("fleet: encoding a token: %w", err)
	}
	body := base64.RawURLEncoding.EncodeToString(b)
	return body + "." + base64.RawURLEncoding.EncodeToString(s.mac(s.keys[0], body)), nil
}

func (s *signer) mac(key []byte, body string) []byte {
	m := hmac.New(sha256.New, key)
	m.Write([]byte(body))
	return m.Sum(nil)
}

// verify checks token's signature and decodes its claims into v, which
// must then say it is of kind.
func (s *signer) verify(token, kind string, v interface{ kind() string }) error {
	body, sig, ok := strings.Cut(token, ".")
	if !ok || len(token) > 8<<10 {
		return errBadToken
	}
	got, err := base64.RawURLEncoding.DecodeString(sig)
	if err != nil {
		return errBadToken
	}
	valid := false
	for _, k := range s.keys {
		// Every key is tried, so the time taken does not say which
		// matched.
		if hmac.Equal(got, s.mac(k, body)) {
			valid = true
		}
	}
	if !valid {
		return errBadToken
	}
	b, err := base64.RawURLEncoding.DecodeString(body)
	if err != nil || json.Unmarshal(b, v) != nil || v.kind() != kind {
		return errBadToken
	}
	return nil
}

func (c *runnerClaims) kind() string { return c.Kind }
func (c *jobClaims) kind() string    { return c.Kind }

// bearer returns the token of an "Authorization: Bearer <token>" header.
func bearer(header string) (string, bool) {
	scheme, token, ok := strings.Cut(header, " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") || token == "" {
		return "", false
	}
	return strings.TrimSpace(token), true
}
