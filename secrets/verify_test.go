package secrets_test

import (
	"context"
	"crypto"
	"crypto/rsa"
	"crypto/sha256"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/coreos/go-oidc/v3/oidc"
	"github.com/golang-jwt/jwt/v5"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/secrets"
)

// serveIssuer serves an Issuer whose URL is the test server's, as a
// platform behind https://ci.example.com would.
func serveIssuer(t *testing.T, cfg secrets.IssuerConfig) (*oidcBundle, *httptest.Server) {
	t.Helper()
	var h atomic.Pointer[http.Handler]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*h.Load()).ServeHTTP(w, r)
	}))
	t.Cleanup(srv.Close)
	cfg.URL = srv.URL
	b := newOIDC(t, cfg)
	handler := b.iss.Handler()
	h.Store(&handler)
	return b, srv
}

// TestCloudVerifiesWithDiscovery: a cloud, with a stock OIDC client and
// nothing but the issuer's URL, verifies a job's token and reads its
// claims, also across a rotation.
func TestCloudVerifiesWithDiscovery(t *testing.T) {
	t.Parallel()
	b, srv := serveIssuer(t, secrets.IssuerConfig{Now: time.Now})
	ctx := oidc.ClientContext(t.Context(), srv.Client())
	id := pushIdentity()
	id.Environment = "prod"
	tok, err := b.iss.Issue(ctx, id, "sts.amazonaws.com")
	require.NoError(t, err)

	provider, err := oidc.NewProvider(ctx, srv.URL)
	require.NoError(t, err)
	cloud := provider.Verifier(&oidc.Config{ClientID: "sts.amazonaws.com"})
	idt, err := cloud.Verify(ctx, tok)
	require.NoError(t, err)
	require.Equal(t, srv.URL, idt.Issuer)
	require.Equal(t, "repo:acme/api:environment:prod", idt.Subject)
	require.Equal(t, []string{"sts.amazonaws.com"}, idt.Audience)
	require.WithinDuration(t, idt.IssuedAt.Add(secrets.DefaultTokenTTL), idt.Expiry, 0)
	var c struct {
		Repository        string `json:"repository"`
		Environment       string `json:"environment"`
		RunID             string `json:"run_id"`
		RunnerEnvironment string `json:"runner_environment"`
	}
	require.NoError(t, idt.Claims(&c))
	require.Equal(t, "acme/api", c.Repository)
	require.Equal(t, "prod", c.Environment)
	require.Equal(t, "1234", c.RunID)
	require.Equal(t, "cikit-hosted", c.RunnerEnvironment)

	_, err = provider.Verifier(&oidc.Config{ClientID: "storage.googleapis.com"}).Verify(ctx, tok)
	require.ErrorContains(t, err, "audience", "the cloud refuses a token for another audience")

	// Our own remote verifier, discovery and all.
	remote, err := secrets.NewRemoteVerifier(t.Context(), srv.URL, "sts.amazonaws.com", srv.Client())
	require.NoError(t, err)
	got, err := remote.Verify(t.Context(), tok)
	require.NoError(t, err)
	require.Equal(t, "prod", got.Environment)

	// After a rotation both read the new key from the JWKS when a token
	// names it.
	require.NoError(t, b.iss.Rotate(t.Context()))
	tok2, err := b.iss.Issue(ctx, id, "sts.amazonaws.com")
	require.NoError(t, err)
	require.NotEqual(t, kidOf(t, tok), kidOf(t, tok2))
	for _, tk := range []string{tok, tok2} {
		_, err = cloud.Verify(ctx, tk)
		require.NoError(t, err)
		_, err = remote.Verify(t.Context(), tk)
		require.NoError(t, err)
	}

	_, err = secrets.NewRemoteVerifier(t.Context(), srv.URL+"/other", "sts.amazonaws.com", srv.Client())
	require.Error(t, err, "no discovery document there")
}

// forge signs claims with priv under header, as RS256.
func forge(t testing.TB, header map[string]any, claims map[string]any, priv *rsa.PrivateKey) string {
	t.Helper()
	h, err := json.Marshal(header)
	require.NoError(t, err)
	p, err := json.Marshal(claims)
	require.NoError(t, err)
	input := base64.RawURLEncoding.EncodeToString(h) + "." + base64.RawURLEncoding.EncodeToString(p)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(nil, priv, crypto.SHA256, sum[:])
	require.NoError(t, err)
	return input + "." + base64.RawURLEncoding.EncodeToString(sig)
}

// claimsOf returns the payload of tok as a map, to edit and re-sign.
func claimsOf(t testing.TB, tok string) map[string]any {
	t.Helper()
	_, p := tokenParts(t, tok)
	var m map[string]any
	require.NoError(t, json.Unmarshal(p, &m))
	return m
}

// TestVerifyRefuses: every way a token can be wrong is refused, with
// ErrTokenInvalid and a reason naming it.
func TestVerifyRefuses(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{})
	ctx := t.Context()
	v := b.iss.Verifier("sts.amazonaws.com")
	good, err := b.iss.Issue(ctx, pushIdentity(), "sts.amazonaws.com")
	require.NoError(t, err)
	_, err = v.Verify(ctx, good)
	require.NoError(t, err)

	stored, err := b.keys.KeyList(ctx)
	require.NoError(t, err)
	real := stored[0]
	kid := real.ID
	hdr := map[string]any{"alg": "RS256", "kid": kid, "typ": "JWT"}
	withClaims := func(edit func(c map[string]any)) string {
		c := claimsOf(t, good)
		edit(c)
		return forge(t, hdr, c, real.Private)
	}
	other := seedKey(t, 1)
	parts := strings.Split(good, ".")

	pubDER, err := x509.MarshalPKIXPublicKey(&real.Private.PublicKey)
	require.NoError(t, err)
	hs := jwt.NewWithClaims(jwt.SigningMethodHS256, jwt.MapClaims(claimsOf(t, good)))
	hs.Header["kid"] = kid
	hmacWithPublicKey, err := hs.SignedString(pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: pubDER}))
	require.NoError(t, err)
	none := base64.RawURLEncoding.EncodeToString([]byte(`{"alg":"none","kid":"`+kid+`"}`)) + "." + parts[1] + "."

	tamperedClaims := claimsOf(t, good)
	tamperedClaims["repository"] = "acme/secret-project"
	tp, _ := json.Marshal(tamperedClaims)
	tampered := parts[0] + "." + base64.RawURLEncoding.EncodeToString(tp) + "." + parts[2]

	// Another platform sharing nothing with this one.
	evil := newOIDC(t, secrets.IssuerConfig{URL: "https://evil.example.com"})
	evilTok, err := evil.iss.Issue(ctx, pushIdentity(), "sts.amazonaws.com")
	require.NoError(t, err)
	// A token of this key store, but naming another issuer.
	sameKeys := newOIDC(t, secrets.IssuerConfig{URL: "https://other.example.com", Keys: b.keys})
	otherIss, err := sameKeys.iss.Issue(ctx, pushIdentity(), "sts.amazonaws.com")
	require.NoError(t, err)
	wrongAud, err := b.iss.Issue(ctx, pushIdentity(), "storage.googleapis.com")
	require.NoError(t, err)

	for _, tc := range []struct {
		name, token, reason string
	}{
		{"empty", "", "3 dot-separated parts"},
		{"garbage", "a.b.c", "malformed header"},
		{"oversized", good + strings.Repeat("A", secrets.MaxTokenBytes), "limit is 16384"},
		{"alg none", none, `algorithm "none"`},
		{"HS256 with the public key as secret", hmacWithPublicKey, `algorithm "HS256"`},
		{"no kid", forge(t, map[string]any{"alg": "RS256"}, claimsOf(t, good), real.Private), "no key (kid)"},
		{"crit header", forge(t, map[string]any{"alg": "RS256", "kid": kid, "crit": []string{"exp"}}, claimsOf(t, good), real.Private), "critical"},
		{"another key, same kid", forge(t, hdr, claimsOf(t, good), other), "bad signature"},
		{"unknown kid", forge(t, map[string]any{"alg": "RS256", "kid": "nope"}, claimsOf(t, good), real.Private), `unknown signing key "nope"`},
		{"tampered payload", tampered, "bad signature"},
		{"another platform", evilTok, "unknown signing key"},
		{"another issuer", otherIss, `issued by "https://other.example.com"`},
		{"wrong audience", wrongAud, `wrong audience "sts.amazonaws.com"`},
		{"no exp", withClaims(func(c map[string]any) { delete(c, "exp") }), "no expiry"},
		{"no iat", withClaims(func(c map[string]any) { delete(c, "iat") }), "no issue time"},
		{"long lifetime", withClaims(func(c map[string]any) { c["exp"] = c["iat"].(float64) + 7200 }), "limit is 1h0m0s"},
		{"time as string", withClaims(func(c map[string]any) { c["exp"] = "tomorrow" }), "unmarshal claims"},
		{"no sub", withClaims(func(c map[string]any) { delete(c, "sub") }), "no sub claim"},
		{"no jti", withClaims(func(c map[string]any) { delete(c, "jti") }), "no jti claim"},
		{"no run_id", withClaims(func(c map[string]any) { delete(c, "run_id") }), "no run_id claim"},
		{"no job_id", withClaims(func(c map[string]any) { delete(c, "job_id") }), "no job_id claim"},
		{"sub claims an environment", withClaims(func(c map[string]any) { c["sub"] = "repo:acme/api:environment:prod" }), "not the subject its claims make"},
		{"sub of another repository", withClaims(func(c map[string]any) { c["sub"] = "repo:acme/other:ref:refs/heads/main" }), "not the subject"},
		{"pull_request sub without head_ref", withClaims(func(c map[string]any) { c["sub"] = "repo:acme/api:pull_request" }), "not the subject"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := v.Verify(ctx, tc.token)
			require.ErrorIs(t, err, secrets.ErrTokenInvalid)
			require.ErrorContains(t, err, tc.reason)
		})
	}
}

// TestVerifyTimes: exp, nbf and iat hold within the clock skew.
func TestVerifyTimes(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{TokenTTL: 5 * time.Minute, ClockSkew: 30 * time.Second})
	ctx := t.Context()
	tok, err := b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
	v := b.iss.Verifier("aud")

	at := func(d time.Duration) error {
		v := *v
		v.Now = func() time.Time { return oidcT0.Add(d) }
		_, err := v.Verify(ctx, tok)
		return err
	}
	require.NoError(t, at(0))
	require.NoError(t, at(5*time.Minute+30*time.Second), "expired, but within the skew")
	require.ErrorContains(t, at(5*time.Minute+31*time.Second), "expired at 2026-03-01T12:05:00Z, 31s ago")
	require.NoError(t, at(-30*time.Second), "a verifier's clock behind by the skew")
	err = at(-31 * time.Second)
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)
	require.ErrorContains(t, err, "not valid before")

	// Through the issuer's own clock.
	b.clock.Advance(5*time.Minute + 31*time.Second)
	_, err = v.Verify(ctx, tok)
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)
	require.ErrorContains(t, err, "expired")
}

// TestVerifyOnceRefusesReplays: the platform's own fetch accepts a token
// once.
func TestVerifyOnceRefusesReplays(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{})
	ctx := t.Context()
	replays := secrets.NewMemoryReplays(b.clock.Now)
	v := b.iss.Verifier("cikit")
	tok, err := b.iss.Issue(ctx, pushIdentity(), "cikit")
	require.NoError(t, err)
	c, err := v.VerifyOnce(ctx, tok, replays)
	require.NoError(t, err)
	require.Equal(t, "repo:acme/api:ref:refs/heads/main", c.Subject)
	_, err = v.VerifyOnce(ctx, tok, replays)
	require.ErrorIs(t, err, secrets.ErrReplayed)

	other, err := b.iss.Issue(ctx, pushIdentity(), "cikit")
	require.NoError(t, err)
	_, err = v.VerifyOnce(ctx, other, replays)
	require.NoError(t, err, "another token of the same job has its own jti")

	// A refused token is not recorded.
	_, err = b.iss.Verifier("other").VerifyOnce(ctx, tok, replays)
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)
}

// TestVerifierUnknownKeyReloadsOncePerGap: forged kids do not make an
// issuer read its store on every token.
func TestVerifierUnknownKeyReloadsOncePerGap(t *testing.T) {
	t.Parallel()
	ks := &countingKeyStore{KeyStore: secrets.NewMemoryKeyStore(oidcKeyring(t, "kek1", 1))}
	b := newOIDC(t, secrets.IssuerConfig{Keys: ks})
	ctx := t.Context()
	tok, err := b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
	forged := forge(t, map[string]any{"alg": "RS256", "kid": "nope"}, claimsOf(t, tok), seedKey(t, 1))
	v := b.iss.Verifier("aud")
	before := ks.lists.Load()
	for range 10 {
		_, err := v.Verify(ctx, forged)
		require.ErrorIs(t, err, secrets.ErrTokenInvalid)
	}
	require.Equal(t, before+1, ks.lists.Load(), "one read of the store for ten tokens of an unknown kid")
	b.clock.Advance(2 * time.Second)
	_, err = v.Verify(ctx, forged)
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)
	require.Equal(t, before+2, ks.lists.Load())
}

type countingKeyStore struct {
	secrets.KeyStore
	lists atomic.Int64
}

func (c *countingKeyStore) KeyList(ctx context.Context) ([]secrets.SigningKey, error) {
	c.lists.Add(1)
	return c.KeyStore.KeyList(ctx)
}

func BenchmarkIssue(b *testing.B) {
	o := newOIDC(b, secrets.IssuerConfig{Now: time.Now})
	ctx, id := context.Background(), pushIdentity()
	b.ReportAllocs()
	for b.Loop() {
		if _, err := o.iss.Issue(ctx, id, "sts.amazonaws.com"); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkVerify(b *testing.B) {
	o := newOIDC(b, secrets.IssuerConfig{Now: time.Now})
	ctx := context.Background()
	tok, err := o.iss.Issue(ctx, pushIdentity(), "sts.amazonaws.com")
	if err != nil {
		b.Fatal(err)
	}
	v := o.iss.Verifier("sts.amazonaws.com")
	b.ReportAllocs()
	for b.Loop() {
		if _, err := v.Verify(ctx, tok); err != nil {
			b.Fatal(err)
		}
	}
}
