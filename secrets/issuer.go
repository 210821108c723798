package secrets

import (
	"cmp"
	"context"
	"crypto"
	"crypto/rand"
	"crypto/rsa"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/go-jose/go-jose/v4"

	"github.com/cikit/cikit"
)

// Defaults and limits of an Issuer.
const (
	// DefaultTokenTTL is how long an ID token is valid by default.
	DefaultTokenTTL = 10 * time.Minute
	// MaxTokenTTL bounds IssuerConfig.TokenTTL; a Verifier refuses a
	// token whose lifetime (exp - iat) is longer.
	MaxTokenTTL = time.Hour
	// DefaultKeyLifetime is how long a key signs before Run rotates it.
	DefaultKeyLifetime = 24 * time.Hour
	// DefaultClockSkew is how far the clocks of the issuer and of a
	// verifier may be apart.
	DefaultClockSkew = 60 * time.Second
	// DefaultReloadInterval is how often an Issuer reads the keys of its
	// KeyStore, to see the rotations of other processes.
	DefaultReloadInterval = 30 * time.Second
	// JWKSMaxAge is how long clients may cache the discovery document and
	// the JWKS (Cache-Control max-age).
	JWKSMaxAge = 300 * time.Second
	// MaxAudienceBytes bounds each audience of a token.
	MaxAudienceBytes = 256
	// MaxAudiences bounds the audiences of one token.
	MaxAudiences = 8
	// MaxTokenBytes bounds an ID token, as issued and as verified.
	MaxTokenBytes = 16 << 10
	// KeyBits is the size of the RSA signing keys: 2048, which every
	// cloud accepts.
	KeyBits = 2048
)

// unknownKeyReloadGap is how often a token of a kid an Issuer does not
// know makes it read its KeyStore: a new key of another process shows
// at once, while forged kids cannot make it hammer the store.
const unknownKeyReloadGap = time.Second

// IssuerConfig configures an Issuer.
type IssuerConfig struct {
	// URL is the issuer, the iss of its tokens: https://ci.example.com,
	// with no trailing slash, query or fragment. http is allowed only
	// for loopback hosts (tests, an embedded platform).
	URL string
	// Keys keeps the signing keys; the server processes of one platform
	// share one.
	Keys KeyStore
	// TokenTTL is how long a token is valid: DefaultTokenTTL if zero, at
	// most MaxTokenTTL.
	TokenTTL time.Duration
	// KeyLifetime is how long a key signs before Run rotates it:
	// DefaultKeyLifetime if zero.
	KeyLifetime time.Duration
	// ClockSkew is the tolerance of the Issuer's verifiers and the margin
	// by which retired keys outlive the tokens they signed:
	// DefaultClockSkew if zero.
	ClockSkew time.Duration
	// ReloadInterval is how often the Issuer reads its KeyStore:
	// DefaultReloadInterval if zero.
	ReloadInterval time.Duration
	// Now is the clock; time.Now if nil.
	Now func() time.Time
	// NewID makes the jti of each token; 128 random bits in hex if nil.
	NewID func() string
	// Logger logs rotations and store failures; slog.Default() if nil.
	Logger *slog.Logger
}

func (c IssuerConfig) withDefaults() IssuerConfig {
	c.TokenTTL = cmp.Or(c.TokenTTL, DefaultTokenTTL)
	c.KeyLifetime = cmp.Or(c.KeyLifetime, DefaultKeyLifetime)
	c.ClockSkew = cmp.Or(c.ClockSkew, DefaultClockSkew)
	c.ReloadInterval = cmp.Or(c.ReloadInterval, DefaultReloadInterval)
	if c.Now == nil {
		c.Now = time.Now
	}
	if c.NewID == nil {
		c.NewID = randomID
	}
	c.Logger = cmp.Or(c.Logger, slog.Default())
	return c
}

func (c IssuerConfig) validate() error {
	if err := validIssuerURL(c.URL); err != nil {
		return err
	}
	switch {
	case c.Keys == nil:
		return fmt.Errorf("%w: IssuerConfig.Keys is nil: give a KeyStore (NewPostgresKeyStore, NewMemoryKeyStore)", ErrInvalid)
	case c.TokenTTL < 0 || c.TokenTTL > MaxTokenTTL:
		return fmt.Errorf("%w: TokenTTL %s: give one up to %s (zero: %s)", ErrInvalid, c.TokenTTL, MaxTokenTTL, DefaultTokenTTL)
	case c.KeyLifetime < 0:
		return fmt.Errorf("%w: KeyLifetime %s is negative", ErrInvalid, c.KeyLifetime)
	case c.ClockSkew < 0:
		return fmt.Errorf("%w: ClockSkew %s is negative", ErrInvalid, c.ClockSkew)
	case c.ReloadInterval < 0:
		return fmt.Errorf("%w: ReloadInterval %s is negative", ErrInvalid, c.ReloadInterval)
	}
	return nil
}

func validIssuerURL(s string) error {
	u, err := url.Parse(s)
	bad := func(why string) error {
		return fmt.Errorf("%w: issuer URL %q: %s", ErrInvalid, s, why)
	}
	switch {
	case s == "":
		return bad("give the platform's URL, such as https://ci.example.com")
	case err != nil:
		return bad(err.Error())
	case u.Host == "" || u.User != nil || u.Opaque != "":
		return bad("write https://HOST[/PATH]")
	case u.RawQuery != "" || u.Fragment != "" || strings.HasSuffix(s, "?") || strings.HasSuffix(s, "#"):
		return bad("an issuer has no query or fragment")
	case strings.HasSuffix(s, "/"):
		return bad("drop the trailing slash: clouds compare the iss claim with the URL as written")
	case u.Scheme == "https":
		return nil
	case u.Scheme == "http" && loopback(u.Hostname()):
		return nil
	case u.Scheme == "http":
		return bad("use https; http is for loopback hosts only")
	}
	return bad("use https")
}

func loopback(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

func randomID() string {
	var b [16]byte
	rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// Issuer makes the platform an OpenID Connect issuer: it signs jobs' ID
// tokens (Issue) with the primary key of its KeyStore, rotates the keys
// (Rotate, Run) and serves the discovery document and the JWKS
// (Handler). It is safe for concurrent use.
//
// # Keys
//
// The primary, the newest key, signs. A key Rotate replaces stays
// published, and verifies, until TokenTTL + ClockSkew + ReloadInterval
// after its retirement, when every token it signed has expired; then
// Prune deletes it. Processes sharing a KeyStore see each other's
// rotations when they read it, every ReloadInterval and when a token
// names a key they do not know; an Issuer whose last read is older than
// ReloadInterval + ClockSkew refuses to sign rather than sign with a key
// that may be retired past its publication.
type Issuer struct {
	cfg       IssuerConfig
	log       *slog.Logger
	discovery []byte
	basePath  string

	mu  sync.RWMutex
	set *keySet

	reloadMu      sync.Mutex
	unknownReload time.Time // guarded by reloadMu
}

// keySet is what an Issuer read from its KeyStore.
type keySet struct {
	loaded time.Time
	keys   []*issuerKey // the newest, the primary, first
}

type issuerKey struct {
	SigningKey
	header string // the encoded JOSE header of the tokens it signs
	public jose.JSONWebKey
}

func (s *keySet) primary() *issuerKey {
	if len(s.keys) == 0 || !s.keys[0].Retired.IsZero() {
		return nil
	}
	return s.keys[0]
}

// NewIssuer returns an Issuer, reading its keys from cfg.Keys and making
// the first if there is none.
func NewIssuer(ctx context.Context, cfg IssuerConfig) (*Issuer, error) {
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	cfg = cfg.withDefaults()
	i := &Issuer{cfg: cfg, log: cfg.Logger, set: &keySet{}}
	u, _ := url.Parse(cfg.URL)
	i.basePath = u.Path
	disc, err := json.Marshal(discoveryDocument{
		Issuer:          cfg.URL,
		JWKSURI:         cfg.URL + jwksPath,
		ResponseTypes:   []string{"id_token"},
		SubjectTypes:    []string{"public", "pairwise"},
		SigningAlgs:     []string{"RS256"},
		ClaimsSupported: claimsSupported,
		Scopes:          []string{"openid"},
	})
	if err != nil {
		return nil, err
	}
	i.discovery = disc
	set, err := i.reload(ctx)
	if err != nil {
		return nil, err
	}
	if set.primary() == nil {
		if err := i.addKey(ctx, newestID(set)); err != nil {
			return nil, err
		}
	}
	return i, nil
}

func newestID(s *keySet) string {
	if len(s.keys) == 0 {
		return ""
	}
	return s.keys[0].ID
}

// URL returns the issuer's URL, the iss of its tokens.
func (i *Issuer) URL() string { return i.cfg.URL }

// TokenTTL returns how long the Issuer's tokens are valid.
func (i *Issuer) TokenTTL() time.Duration { return i.cfg.TokenTTL }

// grace is how long a retired key stays published: until every token it
// signed has expired, also one signed by a process that had not yet seen
// its retirement.
func (i *Issuer) grace() time.Duration {
	return i.cfg.TokenTTL + i.cfg.ClockSkew + i.cfg.ReloadInterval
}

func (i *Issuer) published(k *issuerKey, now time.Time) bool {
	return k.Retired.IsZero() || now.Before(k.Retired.Add(i.grace()))
}

func (i *Issuer) snapshot() *keySet {
	i.mu.RLock()
	defer i.mu.RUnlock()
	return i.set
}

// reload reads the KeyStore.
func (i *Issuer) reload(ctx context.Context) (*keySet, error) {
	i.reloadMu.Lock()
	defer i.reloadMu.Unlock()
	return i.reloadLocked(ctx)
}

func (i *Issuer) reloadLocked(ctx context.Context) (*keySet, error) {
	now := i.cfg.Now()
	stored, err := i.cfg.Keys.KeyList(ctx)
	if err != nil {
		return nil, fmt.Errorf("secrets: read the OIDC signing keys: %w", err)
	}
	set := &keySet{loaded: now, keys: make([]*issuerKey, 0, len(stored))}
	old := map[string]*issuerKey{}
	for _, k := range i.snapshot().keys {
		old[k.ID] = k
	}
	for _, k := range stored {
		if o, ok := old[k.ID]; ok && o.Retired.Equal(k.Retired) {
			set.keys = append(set.keys, o)
			continue
		}
		ik, err := newIssuerKey(k)
		if err != nil {
			return nil, err
		}
		set.keys = append(set.keys, ik)
	}
	i.mu.Lock()
	i.set = set
	i.mu.Unlock()
	return set, nil
}

func newIssuerKey(k SigningKey) (*issuerKey, error) {
	if k.Private == nil || k.Private.N.BitLen() < KeyBits {
		return nil, fmt.Errorf("secrets: OIDC signing key %q is not an RSA key of at least %d bits", k.ID, KeyBits)
	}
	header, err := json.Marshal(struct {
		Alg string `json:"alg"`
		Kid string `json:"kid"`
		Typ string `json:"typ"`
	}{"RS256", k.ID, "JWT"})
	if err != nil {
		return nil, err
	}
	return &issuerKey{
		SigningKey: k,
		header:     base64.RawURLEncoding.EncodeToString(header),
		public:     jose.JSONWebKey{Key: &k.Private.PublicKey, KeyID: k.ID, Algorithm: "RS256", Use: "sig"},
	}, nil
}

// fresh returns the keys, reading the store first if they are older
// than ReloadInterval.
func (i *Issuer) fresh(ctx context.Context) (*keySet, error) {
	set := i.snapshot()
	now := i.cfg.Now()
	if now.Sub(set.loaded) < i.cfg.ReloadInterval {
		return set, nil
	}
	i.reloadMu.Lock()
	defer i.reloadMu.Unlock()
	if cur := i.snapshot(); cur != set {
		return cur, nil // another goroutine read the store meanwhile
	}
	fresh, err := i.reloadLocked(ctx)
	if err == nil {
		return fresh, nil
	}
	if age := now.Sub(set.loaded); age > i.cfg.ReloadInterval+i.cfg.ClockSkew {
		return nil, fmt.Errorf("secrets: the OIDC signing keys were read %s ago, and reading them again failed: %w", age.Round(time.Second), err)
	}
	i.log.Warn("secrets: could not read the OIDC signing keys; using those read before", "error", err)
	return set, nil
}

// verifyKey returns the published key of ID kid, reading the store once
// if it is not known: another process may have just rotated.
func (i *Issuer) verifyKey(ctx context.Context, kid string) (*issuerKey, error) {
	find := func(set *keySet) *issuerKey {
		now := i.cfg.Now()
		for _, k := range set.keys {
			if k.ID == kid && i.published(k, now) {
				return k
			}
		}
		return nil
	}
	set, err := i.fresh(ctx)
	if err != nil {
		return nil, err
	}
	if k := find(set); k != nil {
		return k, nil
	}
	i.reloadMu.Lock()
	now := i.cfg.Now()
	if cur := i.snapshot(); cur == set && now.Sub(i.unknownReload) >= unknownKeyReloadGap {
		i.unknownReload = now
		set, err = i.reloadLocked(ctx)
	} else {
		set = cur
	}
	i.reloadMu.Unlock()
	if err != nil {
		return nil, err
	}
	if k := find(set); k != nil {
		return k, nil
	}
	return nil, fmt.Errorf("unknown signing key %q: not published by %s (or retired long enough ago that its tokens have expired)", kid, i.cfg.URL)
}

func newSigningKey(now time.Time) (SigningKey, error) {
	priv, err := rsa.GenerateKey(rand.Reader, KeyBits)
	if err != nil {
		return SigningKey{}, err
	}
	pub := jose.JSONWebKey{Key: &priv.PublicKey}
	tp, err := pub.Thumbprint(crypto.SHA256)
	if err != nil {
		return SigningKey{}, err
	}
	// The RFC 7638 thumbprint: a kid that names the key itself.
	return SigningKey{ID: base64.RawURLEncoding.EncodeToString(tp), Private: priv, Created: now}, nil
}

// addKey makes a key and adds it as the primary if the store's newest
// key is still ifNewest; if another process added one meanwhile, that
// one is the primary and that is as good.
func (i *Issuer) addKey(ctx context.Context, ifNewest string) error {
	key, err := newSigningKey(i.cfg.Now())
	if err != nil {
		return fmt.Errorf("secrets: make an OIDC signing key: %w", err)
	}
	switch err := i.cfg.Keys.KeyAdd(ctx, key, ifNewest); {
	case errors.Is(err, cikit.ErrConflict):
		i.log.Info("secrets: another process rotated the OIDC signing keys first", "detail", err)
	case err != nil:
		return fmt.Errorf("secrets: add an OIDC signing key: %w", err)
	default:
		i.log.Info("secrets: new OIDC signing key", "kid", key.ID, "replaces", cmp.Or(ifNewest, "none"))
	}
	set, err := i.reload(ctx)
	if err != nil {
		return err
	}
	if set.primary() == nil {
		return fmt.Errorf("secrets: the OIDC key store has no primary key after adding one")
	}
	return nil
}

// Rotate makes a new key the primary. The key it replaces verifies the
// tokens it signed until they expire. If another process sharing the
// KeyStore rotates at the same time, one new key is made, not two.
func (i *Issuer) Rotate(ctx context.Context) error {
	set, err := i.reload(ctx)
	if err != nil {
		return err
	}
	return i.addKey(ctx, newestID(set))
}

// Prune deletes from the KeyStore the retired keys whose tokens have all
// expired, which the JWKS no longer lists, and returns how many.
func (i *Issuer) Prune(ctx context.Context) (int, error) {
	n, err := i.cfg.Keys.KeyDelete(ctx, i.cfg.Now().Add(-i.grace()))
	if err != nil {
		return 0, fmt.Errorf("secrets: prune the OIDC signing keys: %w", err)
	}
	if n > 0 {
		i.log.Info("secrets: pruned OIDC signing keys", "count", n)
	}
	if _, err := i.reload(ctx); err != nil {
		return n, err
	}
	return n, nil
}

// Run reads the keys every ReloadInterval, rotates the primary when it
// is older than KeyLifetime, and prunes, until ctx ends; then it returns
// nil. Failures are logged and retried at the next interval. Every
// server process may run it: their rotations do not race.
func (i *Issuer) Run(ctx context.Context) error {
	t := time.NewTicker(i.cfg.ReloadInterval)
	defer t.Stop()
	for {
		i.maintain(ctx)
		select {
		case <-ctx.Done():
			return nil
		case <-t.C:
		}
	}
}

func (i *Issuer) maintain(ctx context.Context) {
	set, err := i.reload(ctx)
	if err != nil {
		i.log.Warn("secrets: read the OIDC signing keys", "error", err)
		return
	}
	if p := set.primary(); p == nil || !i.cfg.Now().Before(p.Created.Add(i.cfg.KeyLifetime)) {
		if err := i.addKey(ctx, newestID(set)); err != nil {
			i.log.Warn("secrets: rotate the OIDC signing keys", "error", err)
		}
	}
	if _, err := i.Prune(ctx); err != nil {
		i.log.Warn("secrets: prune the OIDC signing keys", "error", err)
	}
}

// Subject returns the sub claim of a job's token: "repo:R:environment:E"
// for a job of environment E, else "repo:R:pull_request" for a job of a
// pull request's run, else "repo:R:ref:REF".
func Subject(id Identity) string {
	switch {
	case id.Environment != "":
		return "repo:" + id.Repository + ":environment:" + id.Environment
	case id.PullRequest:
		return "repo:" + id.Repository + ":pull_request"
	}
	return "repo:" + id.Repository + ":ref:" + id.Ref
}

// claims returns the claims of a token for id and audience, issued at
// now, or an error wrapping ErrInvalid.
func (i *Issuer) claims(id Identity, audience []string, now time.Time) (Claims, error) {
	bad := func(format string, args ...any) error {
		return fmt.Errorf("%w: ID token identity: "+format, append([]any{ErrInvalid}, args...)...)
	}
	switch {
	case !validPathPart(id.Repository, true) || !strings.Contains(id.Repository, "/"):
		return Claims{}, bad("repository %q: write OWNER/NAME", id.Repository)
	case id.Ref == "" || !printable(id.Ref) || strings.Contains(id.Ref, ":"):
		return Claims{}, bad("ref %q: give the git ref the job builds, such as refs/heads/main", id.Ref)
	case id.Environment != "" && (len(id.Environment) > 255 || strings.ContainsAny(id.Environment, ":\x00\r\n")):
		return Claims{}, bad("environment %q: at most 255 bytes, without ':' or control characters", id.Environment)
	case id.RunID == "" || !printable(id.RunID):
		return Claims{}, bad("run ID %q: give the run's ID", id.RunID)
	case id.JobID == "" || !printable(id.JobID):
		return Claims{}, bad("job ID %q: give the job's ID", id.JobID)
	case id.RunAttempt < 0:
		return Claims{}, bad("run attempt %d is negative", id.RunAttempt)
	case id.PullRequest && id.HeadRef == "":
		return Claims{}, bad("a pull request's identity needs its HeadRef, the branch it merges")
	case len(audience) == 0:
		return Claims{}, bad("no audience: give the audience the token is for, such as sts.amazonaws.com")
	case len(audience) > MaxAudiences:
		return Claims{}, bad("%d audiences; the limit is %d", len(audience), MaxAudiences)
	}
	for _, a := range audience {
		if a == "" || len(a) > MaxAudienceBytes || !printable(a) {
			return Claims{}, bad("audience %q: 1 to %d printable ASCII characters, no spaces", a, MaxAudienceBytes)
		}
	}
	owner := id.RepositoryOwner
	if owner == "" {
		owner = id.Repository[:strings.LastIndexByte(id.Repository, '/')]
	}
	refType := id.RefType
	if refType == "" {
		switch {
		case strings.HasPrefix(id.Ref, "refs/heads/"):
			refType = "branch"
		case strings.HasPrefix(id.Ref, "refs/tags/"):
			refType = "tag"
		}
	}
	iat := now.Truncate(time.Second)
	return Claims{
		Issuer:            i.cfg.URL,
		Subject:           Subject(id),
		Audience:          append([]string(nil), audience...),
		IssuedAt:          iat,
		NotBefore:         iat,
		Expiry:            iat.Add(i.cfg.TokenTTL),
		ID:                i.cfg.NewID(),
		Repository:        id.Repository,
		RepositoryOwner:   owner,
		Ref:               id.Ref,
		RefType:           refType,
		SHA:               id.SHA,
		Environment:       id.Environment,
		EventName:         id.EventName,
		Actor:             id.Actor,
		HeadRef:           id.HeadRef,
		BaseRef:           id.BaseRef,
		Fork:              id.Fork,
		RunID:             id.RunID,
		RunAttempt:        strconv.Itoa(max(id.RunAttempt, 1)),
		JobID:             id.JobID,
		RunnerEnvironment: id.RunnerEnvironment,
	}, nil
}

// Issue returns a signed ID token (a JWT, RS256) for the job of id, for
// audience: the claims of Claims, valid for TokenTTL from now. nbf is
// iat: verifiers tolerate clocks behind the issuer's by their skew. A
// RunAttempt of zero is given as "1". An identity without repository,
// ref, run or job, or without an audience, is ErrInvalid.
func (i *Issuer) Issue(ctx context.Context, id Identity, audience ...string) (string, error) {
	c, err := i.claims(id, audience, i.cfg.Now())
	if err != nil {
		return "", err
	}
	set, err := i.fresh(ctx)
	if err != nil {
		return "", err
	}
	key := set.primary()
	if key == nil {
		return "", fmt.Errorf("secrets: the OIDC key store has no primary key: was it emptied under a running issuer?")
	}
	payload, err := json.Marshal(toWire(c))
	if err != nil {
		return "", err
	}
	tok, err := sign(key, payload)
	if err != nil {
		return "", err
	}
	if len(tok) > MaxTokenBytes {
		return "", fmt.Errorf("%w: an ID token of %d bytes; the limit is %d: shorten the identity's values", ErrInvalid, len(tok), MaxTokenBytes)
	}
	return tok, nil
}

func sign(key *issuerKey, payload []byte) (string, error) {
	input := key.header + "." + base64.RawURLEncoding.EncodeToString(payload)
	sum := sha256.Sum256([]byte(input))
	sig, err := rsa.SignPKCS1v15(nil, key.Private, crypto.SHA256, sum[:])
	if err != nil {
		return "", fmt.Errorf("secrets: sign an ID token with key %q: %w", key.ID, err)
	}
	return input + "." + base64.RawURLEncoding.EncodeToString(sig), nil
}

const (
	discoveryPath = "/.well-known/openid-configuration"
	jwksPath      = "/.well-known/jwks"
)

// claimsSupported are the claims of the discovery document.
var claimsSupported = []string{
	"iss", "sub", "aud", "iat", "nbf", "exp", "jti",
	"repository", "repository_owner", "ref", "ref_type", "sha", "environment",
	"event_name", "actor", "head_ref", "base_ref", "fork",
	"run_id", "run_attempt", "job_id", "runner_environment",
}

type discoveryDocument struct {
	Issuer          string   `json:"issuer"`
	JWKSURI         string   `json:"jwks_uri"`
	ResponseTypes   []string `json:"response_types_supported"`
	SubjectTypes    []string `json:"subject_types_supported"`
	SigningAlgs     []string `json:"id_token_signing_alg_values_supported"`
	ClaimsSupported []string `json:"claims_supported"`
	Scopes          []string `json:"scopes_supported"`
}

// Handler serves the discovery document at
// /.well-known/openid-configuration and the published keys at
// /.well-known/jwks, under the path of the issuer's URL (mount it
// without stripping that path), for GET and HEAD, with a Cache-Control
// max-age of JWKSMaxAge. Other paths are 404, other methods 405.
func (i *Issuer) Handler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var body []byte
		switch r.URL.Path {
		case i.basePath + discoveryPath:
			body = i.discovery
		case i.basePath + jwksPath:
		default:
			http.NotFound(w, r)
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			http.Error(w, "method not allowed: use GET", http.StatusMethodNotAllowed)
			return
		}
		if body == nil {
			var err error
			if body, err = i.jwks(r.Context()); err != nil {
				i.log.Error("secrets: serve the JWKS", "error", err)
				http.Error(w, "the signing keys are unavailable", http.StatusServiceUnavailable)
				return
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Header().Set("Cache-Control", fmt.Sprintf("public, max-age=%d", int(JWKSMaxAge/time.Second)))
		w.Header().Set("Content-Length", strconv.Itoa(len(body)))
		if r.Method == http.MethodGet {
			w.Write(body)
		}
	})
}

// jwks returns the JWKS of the published keys.
func (i *Issuer) jwks(ctx context.Context) ([]byte, error) {
	set, err := i.fresh(ctx)
	if err != nil {
		return nil, err
	}
	now := i.cfg.Now()
	ks := jose.JSONWebKeySet{Keys: []jose.JSONWebKey{}}
	for _, k := range set.keys {
		if i.published(k, now) {
			ks.Keys = append(ks.Keys, k.public)
		}
	}
	return json.Marshal(ks)
}
