package secrets_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/rsa"
	"encoding/base64"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/cikit/cikit/internal/clocktest"
	"github.com/cikit/cikit/secrets"
)

var update = flag.Bool("update", false, "rewrite the golden files of testdata")

var (
	oidcT0    = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	quietLog  = slog.New(slog.NewTextHandler(io.Discard, nil))
	seedOnce  sync.Once
	seedKeys  []*rsa.PrivateKey
	seedIDSeq atomic.Int64
)

// seedKey returns a key made once per test binary, so that most tests
// do not spend their time making RSA keys; Rotate makes real ones.
func seedKey(t testing.TB, n int) *rsa.PrivateKey {
	t.Helper()
	seedOnce.Do(func() {
		for range 2 {
			k, err := rsa.GenerateKey(rand.Reader, secrets.KeyBits)
			if err != nil {
				panic(err)
			}
			seedKeys = append(seedKeys, k)
		}
	})
	return seedKeys[n]
}

type oidcBundle struct {
	iss   *secrets.Issuer
	clock *clocktest.Clock
	keys  secrets.KeyStore
	cfg   secrets.IssuerConfig
}

// newOIDC returns an Issuer of https://ci.example.com on a fake clock at
// oidcT0, over a memory key store seeded with a key made beforehand,
// with jti "jti-1", "jti-2"… Fields set in cfg are kept.
func newOIDC(t testing.TB, cfg secrets.IssuerConfig) *oidcBundle {
	t.Helper()
	clock := clocktest.New(oidcT0)
	if cfg.URL == "" {
		cfg.URL = "https://ci.example.com"
	}
	if cfg.Now == nil {
		cfg.Now = clock.Now
	}
	if cfg.Keys == nil {
		ks := secrets.NewMemoryKeyStore(oidcKeyring(t, "kek1", 1))
		seed := secrets.SigningKey{ID: fmt.Sprintf("seed-%d", seedIDSeq.Add(1)), Private: seedKey(t, 0), Created: cfg.Now()}
		require.NoError(t, ks.KeyAdd(context.Background(), seed, ""))
		cfg.Keys = ks
	}
	if cfg.NewID == nil {
		var n atomic.Int64
		cfg.NewID = func() string { return fmt.Sprintf("jti-%d", n.Add(1)) }
	}
	cfg.Logger = quietLog
	iss, err := secrets.NewIssuer(context.Background(), cfg)
	require.NoError(t, err)
	return &oidcBundle{iss: iss, clock: clock, keys: cfg.Keys, cfg: cfg}
}

// pushIdentity is a job of a push to main.
func pushIdentity() secrets.Identity {
	return secrets.Identity{
		Repository: "acme/api", Ref: "refs/heads/main", SHA: "0123456789abcdef0123456789abcdef01234567",
		EventName: "push", Actor: "alice", RunID: "1234", RunAttempt: 1, JobID: "build",
		RunnerEnvironment: "cikit-hosted",
	}
}

// tokenParts decodes a compact JWS's header and payload.
func tokenParts(t testing.TB, tok string) (header map[string]any, payload []byte) {
	t.Helper()
	parts := strings.Split(tok, ".")
	require.Len(t, parts, 3)
	h, err := base64.RawURLEncoding.DecodeString(parts[0])
	require.NoError(t, err)
	require.NoError(t, json.Unmarshal(h, &header))
	payload, err = base64.RawURLEncoding.DecodeString(parts[1])
	require.NoError(t, err)
	return header, payload
}

func kidOf(t testing.TB, tok string) string {
	t.Helper()
	h, _ := tokenParts(t, tok)
	return h["kid"].(string)
}

// TestIssueClaimsGolden: the claims of a token of each kind of event, as
// clouds read them.
func TestIssueClaimsGolden(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{})
	fork := func() secrets.Identity {
		id := pushIdentity()
		id.Ref, id.EventName, id.PullRequest = "refs/pull/7/merge", "pull_request", true
		id.HeadRef, id.BaseRef, id.Actor, id.Fork = "fix-typo", "main", "mallory", true
		return id
	}
	for _, tc := range []struct {
		name     string
		id       func(id *secrets.Identity)
		audience []string
	}{
		{"push_branch", func(id *secrets.Identity) {}, []string{"sts.amazonaws.com"}},
		{"push_tag", func(id *secrets.Identity) {
			id.Ref = "refs/tags/v1.2.0"
		}, []string{"sts.amazonaws.com"}},
		{"pull_request", func(id *secrets.Identity) {
			id.Ref, id.EventName, id.PullRequest = "refs/pull/7/merge", "pull_request", true
			id.HeadRef, id.BaseRef = "feature/login", "main"
		}, []string{"https://vault.example.com"}},
		{"pull_request_fork", func(id *secrets.Identity) { *id = fork() }, []string{"sts.amazonaws.com"}},
		{"environment", func(id *secrets.Identity) {
			id.Environment, id.RunAttempt, id.JobID = "prod", 2, "deploy"
		}, []string{"//iam.googleapis.com/projects/1/locations/global/workloadIdentityPools/ci/providers/cikit"}},
		{"merge_request_event", func(id *secrets.Identity) {
			id.Repository, id.Ref, id.RefType = "acme/platform/api", "refs/merge-requests/5/head", "branch"
			id.EventName, id.PullRequest, id.HeadRef, id.BaseRef = "merge_request_event", true, "feature/y", "main"
			id.RunID, id.JobID, id.RunnerEnvironment = "981", "4711", "self-hosted"
		}, []string{"https://gitlab.example.com", "sts.amazonaws.com"}},
		{"workflow_dispatch", func(id *secrets.Identity) {
			id.Ref, id.EventName, id.RunAttempt = "refs/heads/release", "workflow_dispatch", 0
		}, []string{"sts.amazonaws.com"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			id := pushIdentity()
			tc.id(&id)
			tok, err := b.iss.Issue(t.Context(), id, tc.audience...)
			require.NoError(t, err)
			header, payload := tokenParts(t, tok)
			require.NotEmpty(t, header["kid"])
			header["kid"] = "KID"
			h, err := json.MarshalIndent(header, "", "  ")
			require.NoError(t, err)
			var p bytes.Buffer
			require.NoError(t, json.Indent(&p, payload, "", "  "))
			got := "header: " + string(h) + "\nclaims: " + p.String() + "\n"
			checkGolden(t, filepath.Join("testdata", "claims", tc.name+".golden"), got)

			// What the issuer signed, its verifier reads back.
			c, err := b.iss.Verifier(tc.audience[0]).Verify(t.Context(), tok)
			require.NoError(t, err)
			require.Equal(t, secrets.Subject(id), c.Subject)
			require.Equal(t, id.Fork, c.Fork)
		})
	}
}

func checkGolden(t *testing.T, path, got string) {
	t.Helper()
	if *update {
		require.NoError(t, os.MkdirAll(filepath.Dir(path), 0o755))
		require.NoError(t, os.WriteFile(path, []byte(got), 0o644))
		return
	}
	want, err := os.ReadFile(path)
	require.NoError(t, err, "run go test ./secrets -run %s -update to write it", t.Name())
	require.Equal(t, string(want), got, "%s differs; if the change is meant, rerun with -update", path)
}

func TestSubject(t *testing.T) {
	t.Parallel()
	id := secrets.Identity{Repository: "org/app", Ref: "refs/heads/main"}
	require.Equal(t, "repo:org/app:ref:refs/heads/main", secrets.Subject(id))
	id.PullRequest = true
	require.Equal(t, "repo:org/app:pull_request", secrets.Subject(id))
	id.Environment = "prod"
	require.Equal(t, "repo:org/app:environment:prod", secrets.Subject(id), "the environment wins over the pull request")
}

func TestIssueRefusesInvalidIdentities(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{})
	for name, tc := range map[string]struct {
		edit func(id *secrets.Identity)
		aud  []string
	}{
		"no repository":         {func(id *secrets.Identity) { id.Repository = "" }, []string{"a"}},
		"repository no owner":   {func(id *secrets.Identity) { id.Repository = "api" }, []string{"a"}},
		"repository with colon": {func(id *secrets.Identity) { id.Repository = "acme/a:b" }, []string{"a"}},
		"no ref":                {func(id *secrets.Identity) { id.Ref = "" }, []string{"a"}},
		"no run":                {func(id *secrets.Identity) { id.RunID = "" }, []string{"a"}},
		"no job":                {func(id *secrets.Identity) { id.JobID = "" }, []string{"a"}},
		"negative attempt":      {func(id *secrets.Identity) { id.RunAttempt = -1 }, []string{"a"}},
		"environment colon":     {func(id *secrets.Identity) { id.Environment = "a:b" }, []string{"a"}},
		"pull request no head":  {func(id *secrets.Identity) { id.PullRequest = true }, []string{"a"}},
		"no audience":           {func(id *secrets.Identity) {}, nil},
		"empty audience":        {func(id *secrets.Identity) {}, []string{""}},
		"spaced audience":       {func(id *secrets.Identity) {}, []string{"a b"}},
		"long audience":         {func(id *secrets.Identity) {}, []string{strings.Repeat("a", secrets.MaxAudienceBytes+1)}},
		"too many audiences":    {func(id *secrets.Identity) {}, strings.Split("a,b,c,d,e,f,g,h,i", ",")},
		"oversized token":       {func(id *secrets.Identity) { id.Actor = strings.Repeat("x", secrets.MaxTokenBytes) }, []string{"a"}},
	} {
		id := pushIdentity()
		tc.edit(&id)
		_, err := b.iss.Issue(t.Context(), id, tc.aud...)
		require.ErrorIs(t, err, secrets.ErrInvalid, name)
	}
}

func TestNewIssuerRefusesBadConfig(t *testing.T) {
	t.Parallel()
	keys := secrets.NewMemoryKeyStore(oidcKeyring(t, "kek1", 1))
	for name, cfg := range map[string]secrets.IssuerConfig{
		"no URL":          {Keys: keys},
		"trailing slash":  {URL: "https://ci.example.com/", Keys: keys},
		"http":            {URL: "http://ci.example.com", Keys: keys},
		"query":           {URL: "https://ci.example.com?a=b", Keys: keys},
		"fragment":        {URL: "https://ci.example.com#x", Keys: keys},
		"no host":         {URL: "https:///path", Keys: keys},
		"other scheme":    {URL: "ftp://ci.example.com", Keys: keys},
		"no keys":         {URL: "https://ci.example.com"},
		"long TTL":        {URL: "https://ci.example.com", Keys: keys, TokenTTL: 2 * time.Hour},
		"negative TTL":    {URL: "https://ci.example.com", Keys: keys, TokenTTL: -time.Second},
		"negative skew":   {URL: "https://ci.example.com", Keys: keys, ClockSkew: -time.Second},
		"negative reload": {URL: "https://ci.example.com", Keys: keys, ReloadInterval: -time.Second},
	} {
		_, err := secrets.NewIssuer(t.Context(), cfg)
		require.ErrorIs(t, err, secrets.ErrInvalid, name)
	}
	for _, u := range []string{"http://127.0.0.1:8080", "http://localhost", "http://[::1]:9", "https://ci.example.com/oidc"} {
		b := newOIDC(t, secrets.IssuerConfig{URL: u})
		require.Equal(t, u, b.iss.URL())
	}
}

// TestNewIssuerMakesTheFirstKey: an empty store gets one key, also when
// several processes start on it at once.
func TestNewIssuerMakesTheFirstKey(t *testing.T) {
	t.Parallel()
	keys, _ := newPostgresKeyStore(t, oidcKeyring(t, "kek1", 1))
	const n = 3
	var wg sync.WaitGroup
	for range n {
		wg.Go(func() {
			_, err := secrets.NewIssuer(t.Context(), secrets.IssuerConfig{URL: "https://ci.example.com", Keys: keys, Logger: quietLog})
			assert.NoError(t, err)
		})
	}
	wg.Wait()
	got, err := keys.KeyList(t.Context())
	require.NoError(t, err)
	require.Len(t, got, 1, "SAFETY: processes starting together on an empty store make one key")
	require.Equal(t, secrets.KeyBits, got[0].Private.N.BitLen())
}

func get(t *testing.T, h http.Handler, method, path string) *httptest.ResponseRecorder {
	t.Helper()
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest(method, path, nil))
	return rec
}

type jwks struct {
	Keys []struct {
		Kty, Kid, Use, Alg, N, E string
	} `json:"keys"`
}

func jwksOf(t *testing.T, h http.Handler, path string) jwks {
	t.Helper()
	rec := get(t, h, http.MethodGet, path)
	require.Equal(t, http.StatusOK, rec.Code)
	var ks jwks
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &ks))
	return ks
}

func (ks jwks) kids() []string {
	var out []string
	for _, k := range ks.Keys {
		out = append(out, k.Kid)
	}
	return out
}

func TestHandler(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{URL: "https://ci.example.com/oidc"})
	h := b.iss.Handler()

	rec := get(t, h, http.MethodGet, "/oidc/.well-known/openid-configuration")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Equal(t, "application/json", rec.Header().Get("Content-Type"))
	require.Equal(t, "public, max-age=300", rec.Header().Get("Cache-Control"))
	var doc map[string]any
	require.NoError(t, json.Unmarshal(rec.Body.Bytes(), &doc))
	require.Equal(t, "https://ci.example.com/oidc", doc["issuer"])
	require.Equal(t, "https://ci.example.com/oidc/.well-known/jwks", doc["jwks_uri"])
	require.Equal(t, []any{"id_token"}, doc["response_types_supported"])
	require.Equal(t, []any{"public", "pairwise"}, doc["subject_types_supported"])
	require.Equal(t, []any{"RS256"}, doc["id_token_signing_alg_values_supported"])
	require.Equal(t, []any{"openid"}, doc["scopes_supported"])
	require.Contains(t, doc["claims_supported"], "repository")
	require.Contains(t, doc["claims_supported"], "runner_environment")

	ks := jwksOf(t, h, "/oidc/.well-known/jwks")
	require.Len(t, ks.Keys, 1)
	k := ks.Keys[0]
	require.Equal(t, "RSA", k.Kty)
	require.Equal(t, "sig", k.Use)
	require.Equal(t, "RS256", k.Alg)
	require.Equal(t, "AQAB", k.E)
	require.NotEmpty(t, k.N)
	tok, err := b.iss.Issue(t.Context(), pushIdentity(), "aud")
	require.NoError(t, err)
	require.Equal(t, kidOf(t, tok), k.Kid)

	rec = get(t, h, http.MethodHead, "/oidc/.well-known/jwks")
	require.Equal(t, http.StatusOK, rec.Code)
	require.Empty(t, rec.Body.Bytes())
	rec = get(t, h, http.MethodPost, "/oidc/.well-known/jwks")
	require.Equal(t, http.StatusMethodNotAllowed, rec.Code)
	require.Equal(t, "GET, HEAD", rec.Header().Get("Allow"))
	require.Equal(t, http.StatusMethodNotAllowed, get(t, h, http.MethodDelete, "/oidc/.well-known/openid-configuration").Code)
	require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/.well-known/jwks").Code, "the issuer's path is part of the URL")
	require.Equal(t, http.StatusNotFound, get(t, h, http.MethodGet, "/oidc/.well-known/other").Code)
}

// TestRotation: a token signed before a rotation verifies after it, its
// key stays published until its tokens have expired, and Prune then
// drops it.
func TestRotation(t *testing.T) {
	t.Parallel()
	b := newOIDC(t, secrets.IssuerConfig{TokenTTL: 5 * time.Minute, ClockSkew: 30 * time.Second, ReloadInterval: 10 * time.Second})
	ctx, h, v := t.Context(), b.iss.Handler(), b.iss.Verifier("aud")
	old, err := b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)

	require.NoError(t, b.iss.Rotate(ctx))
	cur, err := b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
	require.NotEqual(t, kidOf(t, old), kidOf(t, cur), "the new key signs")
	require.ElementsMatch(t, []string{kidOf(t, old), kidOf(t, cur)}, jwksOf(t, h, "/.well-known/jwks").kids())
	for _, tok := range []string{old, cur} {
		_, err := v.Verify(ctx, tok)
		require.NoError(t, err)
	}

	// The old key is published for TTL + skew + reload interval after
	// its retirement.
	grace := 5*time.Minute + 30*time.Second + 10*time.Second
	b.clock.Advance(grace - time.Second)
	n, err := b.iss.Prune(ctx)
	require.NoError(t, err)
	require.Zero(t, n)
	require.Len(t, jwksOf(t, h, "/.well-known/jwks").Keys, 2)

	b.clock.Advance(2 * time.Second)
	require.Equal(t, []string{kidOf(t, cur)}, jwksOf(t, h, "/.well-known/jwks").kids(), "past its grace, a key is not published even before Prune")
	n, err = b.iss.Prune(ctx)
	require.NoError(t, err)
	require.Equal(t, 1, n)
	stored, err := b.keys.KeyList(ctx)
	require.NoError(t, err)
	require.Len(t, stored, 1)
	require.Equal(t, kidOf(t, cur), stored[0].ID)
	_, err = v.Verify(ctx, old)
	require.ErrorIs(t, err, secrets.ErrTokenInvalid)
}

// TestProcessesShareKeys: two issuers over one PostgreSQL store verify
// each other's tokens across a rotation, and rotate once between them.
func TestProcessesShareKeys(t *testing.T) {
	t.Parallel()
	ctx := t.Context()
	keys, _ := newPostgresKeyStore(t, oidcKeyring(t, "kek1", 1))
	clock := clocktest.New(oidcT0)
	cfg := secrets.IssuerConfig{Keys: keys, Now: clock.Now, KeyLifetime: time.Hour, ReloadInterval: 5 * time.Millisecond}
	a, b := newOIDC(t, cfg), newOIDC(t, cfg)

	tokA, err := a.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
	tokB, err := b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
	require.Equal(t, kidOf(t, tokA), kidOf(t, tokB), "one primary for both")
	first := kidOf(t, tokA)

	// A rotates; B learns of the new key from the first token naming it.
	require.NoError(t, a.iss.Rotate(ctx))
	tokA, err = a.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
	require.NotEqual(t, first, kidOf(t, tokA))
	_, err = b.iss.Verifier("aud").Verify(ctx, tokA)
	require.NoError(t, err, "an unknown kid makes B read the store")
	second := kidOf(t, tokA)

	// Both run; the primary gets old; one of them rotates, and the other
	// adopts its key rather than making one more.
	runCtx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	for _, iss := range []*secrets.Issuer{a.iss, b.iss} {
		wg.Go(func() { assert.NoError(t, iss.Run(runCtx)) })
	}
	clock.Advance(time.Hour)
	primaryOf := func(iss *secrets.Issuer) string {
		tok, err := iss.Issue(ctx, pushIdentity(), "aud")
		if err != nil {
			return ""
		}
		return kidOf(t, tok)
	}
	require.Eventually(t, func() bool {
		pa, pb := primaryOf(a.iss), primaryOf(b.iss)
		return pa != second && pa != first && pa != "" && pa == pb
	}, 30*time.Second, 5*time.Millisecond, "LIVENESS: a primary older than KeyLifetime is rotated, and both processes sign with the new key")
	cancel()
	wg.Wait()
	_, err = a.iss.Prune(ctx)
	require.NoError(t, err)
	stored, err := keys.KeyList(ctx)
	require.NoError(t, err)
	ids := []string{}
	for _, k := range stored {
		ids = append(ids, k.ID)
	}
	// The first key, retired an hour ago, is pruned.
	require.Equal(t, []string{primaryOf(a.iss), second}, ids, "SAFETY: one rotation, not one per process")
}

// TestIssueRefusesStaleKeys: an issuer that cannot read its store for
// longer than ReloadInterval + ClockSkew stops signing.
func TestIssueRefusesStaleKeys(t *testing.T) {
	t.Parallel()
	ks := &failingKeyStore{KeyStore: secrets.NewMemoryKeyStore(oidcKeyring(t, "kek1", 1))}
	b := newOIDC(t, secrets.IssuerConfig{Keys: ks, ReloadInterval: time.Minute, ClockSkew: time.Minute})
	ctx := t.Context()
	ks.fail.Store(true)
	b.clock.Advance(90 * time.Second)
	_, err := b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err, "a failed read within the margin uses the keys read before")
	b.clock.Advance(31 * time.Second)
	_, err = b.iss.Issue(ctx, pushIdentity(), "aud")
	require.ErrorContains(t, err, "store down")
	ks.fail.Store(false)
	_, err = b.iss.Issue(ctx, pushIdentity(), "aud")
	require.NoError(t, err)
}

type failingKeyStore struct {
	secrets.KeyStore
	fail atomic.Bool
}

func (f *failingKeyStore) KeyList(ctx context.Context) ([]secrets.SigningKey, error) {
	if f.fail.Load() {
		return nil, fmt.Errorf("store down")
	}
	return f.KeyStore.KeyList(ctx)
}
