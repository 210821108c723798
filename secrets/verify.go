package secrets

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/go-jose/go-jose/v4"
)

// Verifier checks the ID tokens of one issuer for one audience:
// signature (RS256 only), issuer, audience, expiry and not-before within
// a clock skew, size, the claims a job's token must have, and that its
// sub is the one its claims make (Subject). It is built on go-oidc's
// verifier, which checks the signature; the claims it checks itself, to
// apply its skew and say what is wrong. It is safe for concurrent use
// once its fields are set.
type Verifier struct {
	// ClockSkew is how far the issuer's clock may be from this one:
	// DefaultClockSkew unless set before first use.
	ClockSkew time.Duration
	// Now is the clock, time.Now unless set before first use.
	Now func() time.Time

	issuer, audience string
	oidc             *oidc.IDTokenVerifier
}

func newVerifier(issuer, audience string, v *oidc.IDTokenVerifier, now func() time.Time, skew time.Duration) *Verifier {
	return &Verifier{ClockSkew: skew, Now: now, issuer: issuer, audience: audience, oidc: v}
}

// oidcConfig has go-oidc check the signature, and only RS256 ones.
func oidcConfig() *oidc.Config {
	return &oidc.Config{
		SupportedSigningAlgs: []string{oidc.RS256},
		// Verify checks these claims after the signature, with its skew
		// (go-oidc allows none on exp) and reasons a caller can act on.
		SkipClientIDCheck: true,
		SkipIssuerCheck:   true,
		SkipExpiryCheck:   true,
	}
}

// Verifier returns a Verifier of the tokens of i for audience, checking
// signatures with i's keys directly, with no HTTP round-trip, and i's
// clock and ClockSkew.
func (i *Issuer) Verifier(audience string) *Verifier {
	return newVerifier(i.cfg.URL, audience, oidc.NewVerifier(i.cfg.URL, issuerKeySet{i}, oidcConfig()), i.cfg.Now, i.cfg.ClockSkew)
}

// NewRemoteVerifier returns a Verifier of the tokens of issuerURL for
// audience, for code that runs away from the issuer: it reads the
// issuer's discovery document now, and its JWKS when a token names a key
// it has not seen, with client (http.DefaultClient if nil).
func NewRemoteVerifier(ctx context.Context, issuerURL, audience string, client *http.Client) (*Verifier, error) {
	if audience == "" {
		return nil, fmt.Errorf("%w: NewRemoteVerifier needs the audience its tokens are for", ErrInvalid)
	}
	if client != nil {
		ctx = oidc.ClientContext(ctx, client)
	}
	p, err := oidc.NewProvider(ctx, issuerURL)
	if err != nil {
		return nil, fmt.Errorf("secrets: discover OIDC issuer %s: %w", issuerURL, err)
	}
	var meta struct {
		Algs []string `json:"id_token_signing_alg_values_supported"`
	}
	if err := p.Claims(&meta); err != nil || !slices.Contains(meta.Algs, oidc.RS256) {
		return nil, fmt.Errorf("secrets: OIDC issuer %s does not sign with RS256 (it gives %q)", issuerURL, meta.Algs)
	}
	return newVerifier(issuerURL, audience, p.Verifier(oidcConfig()), time.Now, DefaultClockSkew), nil
}

// issuerKeySet is an oidc.KeySet over an Issuer's published keys.
type issuerKeySet struct{ i *Issuer }

func (s issuerKeySet) VerifySignature(ctx context.Context, raw string) ([]byte, error) {
	jws, err := jose.ParseSigned(raw, []jose.SignatureAlgorithm{jose.RS256})
	if err != nil {
		return nil, err
	}
	if len(jws.Signatures) != 1 {
		return nil, errors.New("not one signature")
	}
	k, err := s.i.verifyKey(ctx, jws.Signatures[0].Header.KeyID)
	if err != nil {
		return nil, err
	}
	payload, err := jws.Verify(&k.Private.PublicKey)
	if err != nil {
		return nil, fmt.Errorf("bad signature: not made by key %q", k.ID)
	}
	return payload, nil
}

func tokenErr(format string, args ...any) error {
	return fmt.Errorf("%w: "+format, append([]any{ErrTokenInvalid}, args...)...)
}

// Verify checks raw and returns its claims, or an error wrapping
// ErrTokenInvalid that says why it is refused: malformed, too large, an
// algorithm other than RS256, an unknown key, a bad signature, another
// issuer, another audience, expired, not yet valid, issued in the
// future, valid for longer than MaxTokenTTL, a required claim (sub, jti,
// repository, run_id, job_id) missing, or a sub its claims do not make.
// It does not check replays: see VerifyOnce.
func (v *Verifier) Verify(ctx context.Context, raw string) (*Claims, error) {
	if len(raw) > MaxTokenBytes {
		return nil, tokenErr("a token of %d bytes; the limit is %d", len(raw), MaxTokenBytes)
	}
	if err := checkHeader(raw); err != nil {
		return nil, err
	}
	tok, err := v.oidc.Verify(ctx, raw)
	if err != nil {
		msg := strings.TrimPrefix(err.Error(), "failed to verify signature: ")
		return nil, tokenErr("%s", strings.TrimPrefix(msg, "oidc: "))
	}
	var w wireClaims
	if err := tok.Claims(&w); err != nil {
		return nil, tokenErr("malformed claims: %v", err)
	}
	c := w.claims()
	if err := v.check(&c); err != nil {
		return nil, err
	}
	return &c, nil
}

// VerifyOnce is Verify, and then records the token's use in r: a token
// presented before is refused with an error wrapping ErrReplayed.
func (v *Verifier) VerifyOnce(ctx context.Context, raw string, r Replays) (*Claims, error) {
	c, err := v.Verify(ctx, raw)
	if err != nil {
		return nil, err
	}
	if err := r.Use(ctx, c.ID, c.Expiry.Add(v.skew())); err != nil {
		return nil, err
	}
	return c, nil
}

func (v *Verifier) skew() time.Duration {
	if v.ClockSkew < 0 {
		return 0
	}
	return v.ClockSkew
}

// checkHeader refuses a token whose header is not the one of our tokens
// before any key is looked at, so that "alg":"none" or an HMAC with a
// public key as secret is named for what it is.
func checkHeader(raw string) error {
	parts := strings.Split(raw, ".")
	if len(parts) != 3 {
		return tokenErr("malformed: a JWT has 3 dot-separated parts, this has %d", len(parts))
	}
	b, err := base64.RawURLEncoding.DecodeString(parts[0])
	if err != nil {
		return tokenErr("malformed header: %v", err)
	}
	var h struct {
		Alg  string `json:"alg"`
		Kid  string `json:"kid"`
		Crit []any  `json:"crit"`
	}
	if err := json.Unmarshal(b, &h); err != nil {
		return tokenErr("malformed header: %v", err)
	}
	switch {
	case h.Alg != "RS256":
		return tokenErr("algorithm %q: only RS256 is accepted", h.Alg)
	case h.Kid == "":
		return tokenErr("the header names no key (kid)")
	case h.Crit != nil:
		return tokenErr("the header has critical extensions, which are not supported")
	}
	return nil
}

func (v *Verifier) check(c *Claims) error {
	now := time.Now()
	if v.Now != nil {
		now = v.Now()
	}
	skew := v.skew()
	switch {
	case c.Issuer != v.issuer:
		return tokenErr("issued by %q, not %q", c.Issuer, v.issuer)
	case !slices.Contains(c.Audience, v.audience):
		return tokenErr("wrong audience %q: the token is for %q", v.audience, c.Audience)
	case c.Expiry.IsZero():
		return tokenErr("no expiry (exp)")
	case c.IssuedAt.IsZero():
		return tokenErr("no issue time (iat)")
	case now.After(c.Expiry.Add(skew)):
		return tokenErr("expired at %s, %s ago", c.Expiry.UTC().Format(time.RFC3339), now.Sub(c.Expiry).Round(time.Second))
	case !c.NotBefore.IsZero() && now.Add(skew).Before(c.NotBefore):
		return tokenErr("not valid before %s, in %s", c.NotBefore.UTC().Format(time.RFC3339), c.NotBefore.Sub(now).Round(time.Second))
	case now.Add(skew).Before(c.IssuedAt):
		return tokenErr("issued in the future, at %s", c.IssuedAt.UTC().Format(time.RFC3339))
	case c.Expiry.Sub(c.IssuedAt) > MaxTokenTTL:
		return tokenErr("valid for %s; the limit is %s", c.Expiry.Sub(c.IssuedAt), MaxTokenTTL)
	}
	for _, req := range []struct{ name, value string }{
		{"sub", c.Subject}, {"jti", c.ID}, {"repository", c.Repository}, {"run_id", c.RunID}, {"job_id", c.JobID},
	} {
		if req.value == "" {
			return tokenErr("no %s claim", req.name)
		}
	}
	if !subjectMatches(c) {
		return tokenErr("sub %q is not the subject its claims make", c.Subject)
	}
	return nil
}

// subjectMatches reports whether c's sub is the one Subject makes of its
// claims. Claims do not say whether the run is a pull request's; the
// pull_request form needs a head_ref, which Issue requires of a pull
// request.
func subjectMatches(c *Claims) bool {
	id := Identity{Repository: c.Repository, Ref: c.Ref, Environment: c.Environment}
	if c.Subject == Subject(id) {
		return true
	}
	id.PullRequest = true
	return c.HeadRef != "" && c.Subject == Subject(id)
}

// wireClaims are Claims as a JWT carries them: times as NumericDate, an
// audience of one as a string.
type wireClaims struct {
	Claims
	Audience  audience    `json:"aud"`
	IssuedAt  numericDate `json:"iat"`
	NotBefore numericDate `json:"nbf"`
	Expiry    numericDate `json:"exp"`
}

func toWire(c Claims) wireClaims {
	return wireClaims{
		Claims:    c,
		Audience:  c.Audience,
		IssuedAt:  numericDate(c.IssuedAt),
		NotBefore: numericDate(c.NotBefore),
		Expiry:    numericDate(c.Expiry),
	}
}

func (w wireClaims) claims() Claims {
	c := w.Claims
	c.Audience = w.Audience
	c.IssuedAt = time.Time(w.IssuedAt)
	c.NotBefore = time.Time(w.NotBefore)
	c.Expiry = time.Time(w.Expiry)
	return c
}

type audience []string

func (a audience) MarshalJSON() ([]byte, error) {
	if len(a) == 1 {
		return json.Marshal(a[0])
	}
	return json.Marshal([]string(a))
}

func (a *audience) UnmarshalJSON(b []byte) error {
	if bytes.HasPrefix(bytes.TrimSpace(b), []byte(`"`)) {
		var s string
		if err := json.Unmarshal(b, &s); err != nil {
			return err
		}
		*a = audience{s}
		return nil
	}
	return json.Unmarshal(b, (*[]string)(a))
}

// numericDate is a JWT NumericDate: seconds since the epoch, zero time
// when absent.
type numericDate time.Time

func (d numericDate) MarshalJSON() ([]byte, error) {
	return strconv.AppendInt(nil, time.Time(d).Unix(), 10), nil
}

func (d *numericDate) UnmarshalJSON(b []byte) error {
	if string(b) == "null" {
		return nil
	}
	f, err := strconv.ParseFloat(string(b), 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) || f < 0 || f > 1<<40 {
		return fmt.Errorf("a time claim of %s: want seconds since 1970", b)
	}
	sec, frac := math.Modf(f)
	*d = numericDate(time.Unix(int64(sec), int64(frac*1e9)).UTC())
	return nil
}
