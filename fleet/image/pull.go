package image

import (
	"bytes"
	"cmp"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/netip"
	"net/url"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/remote/transport"
	"github.com/google/go-containerregistry/pkg/v1/types"
	"golang.org/x/sync/errgroup"
)

// Defaults of Config.
const (
	DefaultBudget        int64 = 20 << 30
	DefaultMaxImageBytes int64 = 10 << 30
	// DefaultMaxLayers bounds an image's layers, when pulled
	// (Config.MaxLayers) and unpacked (Limits.MaxLayers): Docker's 127.
	DefaultMaxLayers = 127
)

// parallelLayers is how many layers of one image download at once.
const parallelLayers = 4

// Config configures a Puller.
type Config struct {
	// Dir is the cache's root directory, required. The Puller owns it:
	// blobs live under blobs/sha256, the references it resolved in
	// refs.json.
	Dir string
	// Budget bounds the bytes of the cached blobs; DefaultBudget if 0.
	Budget int64
	// Mirrors maps a registry host ("index.docker.io") to the hosts of
	// mirrors tried, in order, before it. A mirror that fails or lacks
	// the image is passed over for the next, and the registry itself.
	Mirrors map[string][]string
	// DockerConfig is the path of a Docker config.json whose "auths"
	// give per-registry credentials. None if empty: the runner's own
	// Docker configuration is never read implicitly.
	DockerConfig string
	// Insecure lists registry hosts reached over plain HTTP.
	Insecure []string
	// Platform is the platform an index is resolved to; linux and the
	// runner's architecture if its OS is empty.
	Platform v1.Platform
	// Transport carries the requests to registries; http.DefaultTransport
	// if nil.
	Transport http.RoundTripper
	// MaxImageBytes caps the compressed size of an image's layers;
	// DefaultMaxImageBytes if 0.
	MaxImageBytes int64
	// MaxLayers caps an image's layer count; DefaultMaxLayers if 0.
	MaxLayers int
	// Now is the clock of last use, for eviction; time.Now if nil.
	Now func() time.Time
	// Logger receives a record per pull; discarded if nil.
	Logger *slog.Logger
}

// Puller resolves image references and pulls their blobs into its
// cache. It is safe for concurrent use; two Pullers must not share a
// Dir.
type Puller struct {
	cfg      Config
	creds    credentials
	insecure map[string]bool
	cache    *cache
}

// New opens the cache in cfg.Dir, creating it if needed, and returns a
// Puller over it.
func New(cfg Config) (*Puller, error) {
	if cfg.Dir == "" {
		return nil, errors.New("image: Dir is required")
	}
	cfg.Budget = cmp.Or(cfg.Budget, DefaultBudget)
	cfg.MaxImageBytes = cmp.Or(cfg.MaxImageBytes, DefaultMaxImageBytes)
	cfg.MaxLayers = cmp.Or(cfg.MaxLayers, DefaultMaxLayers)
	if cfg.Budget < 0 || cfg.MaxImageBytes < 0 || cfg.MaxLayers < 0 {
		return nil, errors.New("image: Budget, MaxImageBytes and MaxLayers must not be negative")
	}
	if cfg.Platform.OS == "" {
		cfg.Platform = v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
	}
	cfg.Transport = cmp.Or[http.RoundTripper](cfg.Transport, http.DefaultTransport)
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	creds, err := loadDockerConfig(cfg.DockerConfig)
	if err != nil {
		return nil, fmt.Errorf("image: %w", err)
	}
	c, err := openCache(cfg.Dir, cfg.Budget, cfg.Now, readBootID())
	if err != nil {
		return nil, fmt.Errorf("image: opening the cache: %w", err)
	}
	p := &Puller{cfg: cfg, creds: creds, insecure: map[string]bool{}, cache: c}
	for _, h := range cfg.Insecure {
		p.insecure[h] = true
	}
	return p, nil
}

// PullOptions are the options of one pull.
type PullOptions struct {
	// Policy says whether to ask the registry; PullAlways if empty.
	Policy PullPolicy
	// Auth are credentials the job gives for its image's registry
	// (GitHub's container.credentials). They are used for this pull
	// only, sent to that registry only (never to a mirror), and neither
	// stored nor logged. They take precedence over DockerConfig.
	Auth *authn.Basic
}

// Layer is a compressed layer of a pulled image, held in the cache.
type Layer struct {
	// Digest is the digest of the compressed blob at Path; DiffID that
	// of its uncompressed tar, from the image config.
	Digest v1.Hash
	DiffID v1.Hash
	// MediaType says how the blob is compressed.
	MediaType types.MediaType
	// Size is the blob's size in bytes.
	Size int64
	// Path is the blob's file. It stays while the Pulled holding it is
	// not released; it must not be written.
	Path string
}

// Pulled is an image whose blobs the cache holds, and keeps, until
// Release: a job takes one for as long as it runs on the image.
type Pulled struct {
	Image
	// Layers are the image's layers, base first.
	Layers []Layer

	release func()
}

// Release lets the cache evict the image's blobs again. It is safe to
// call more than once.
func (p *Pulled) Release() { p.release() }

// Usage reports the bytes the cache's blobs take.
func (p *Puller) Usage() int64 { return p.cache.usage() }

// Pull resolves ref ("alpine:3.19", "ghcr.io/o/r@sha256:…") to the
// manifest for the configured platform and makes sure the cache holds
// its config and layers, downloading those it lacks. The caller must
// Release the result.
//
// Errors match ErrConfig (unknown repository or tag, denied
// credentials, no manifest for the platform, a wrong digest, the caps,
// PullNever with the image absent), ErrRegistry (unreachable, 5xx, 429)
// or ErrBudget, with the registry's message; or they are the context's
// error.
func (p *Puller) Pull(ctx context.Context, ref string, opts PullOptions) (*Pulled, error) {
	r, err := name.ParseReference(ref)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrConfig, err)
	}
	if p.insecure[r.Context().RegistryStr()] {
		if r, err = name.ParseReference(ref, name.Insecure); err != nil {
			return nil, fmt.Errorf("%w: %v", ErrConfig, err)
		}
	}
	key := r.Name() + " " + p.cfg.Platform.String()
	policy := cmp.Or(opts.Policy, PullAlways)
	switch policy {
	case PullAlways:
	case PullIfNotPresent, PullNever:
		if pulled, ok := p.cached(r, ref, key); ok {
			return pulled, nil
		}
		if policy == PullNever {
			return nil, fmt.Errorf("%w: %s is not in the cache and the pull policy is %s", ErrConfig, ref, policy)
		}
	default:
		return nil, fmt.Errorf("%w: unknown pull policy %q", ErrConfig, policy)
	}

	srcs, digest, raw, err := p.resolve(ctx, r, opts.Auth)
	if err != nil {
		return nil, err
	}
	m, err := p.parseManifest(ref, raw)
	if err != nil {
		return nil, err
	}
	blobs := append([]v1.Hash{digest, m.Config.Digest}, layerDigests(m)...)
	p.cache.pin(blobs)
	pulled, err := p.download(ctx, srcs, ref, digest, raw, m, blobs)
	if err != nil {
		p.cache.unpin(blobs)
		return nil, err
	}
	if err := p.cache.record(key, digest); err != nil {
		pulled.Release()
		return nil, fmt.Errorf("image: recording %s: %w", ref, err)
	}
	p.cfg.Logger.InfoContext(ctx, "image pulled", "ref", ref, "digest", digest.String(), "source", srcs[0].repo.RegistryStr(), "bytes", pulled.Size)
	return pulled, nil
}

// cached returns the image key was resolved to before, or that r names
// by digest, if the cache still holds every blob of it, pinned.
func (p *Puller) cached(r name.Reference, ref, key string) (*Pulled, bool) {
	digest, ok := p.cache.lookup(key)
	if d, byDigest := r.(name.Digest); !ok && byDigest {
		var err error
		digest, err = v1.NewHash(d.DigestStr())
		ok = err == nil
	}
	if !ok {
		return nil, false
	}
	raw, err := readBlob(p.cache.path(digest))
	if err != nil {
		return nil, false
	}
	m, err := p.parseManifest(ref, raw)
	if err != nil {
		return nil, false
	}
	blobs := append([]v1.Hash{digest, m.Config.Digest}, layerDigests(m)...)
	if !p.cache.pinPresent(blobs) {
		return nil, false
	}
	pulled, err := p.assemble(ref, digest, m, blobs)
	if err != nil {
		p.cache.unpin(blobs)
		return nil, false
	}
	return pulled, true
}

func readBlob(path string) ([]byte, error) {
	return readFileLimit(path, maxManifestBytes)
}

// maxManifestBytes bounds the manifests, indexes and configs read into
// memory.
const maxManifestBytes = 8 << 20

func layerDigests(m *v1.Manifest) []v1.Hash {
	hs := make([]v1.Hash, len(m.Layers))
	for i, l := range m.Layers {
		hs[i] = l.Digest
	}
	return hs
}

// parseManifest parses an image manifest and checks it against the
// caps before anything of it is downloaded.
func (p *Puller) parseManifest(ref string, raw []byte) (*v1.Manifest, error) {
	m, err := v1.ParseManifest(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: the manifest of %s: %v", ErrConfig, ref, err)
	}
	if len(m.Layers) > p.cfg.MaxLayers {
		return nil, fmt.Errorf("%w: %s has %d layers, more than the %d allowed", ErrConfig, ref, len(m.Layers), p.cfg.MaxLayers)
	}
	if m.Config.Size > maxManifestBytes {
		return nil, fmt.Errorf("%w: the config of %s is %d bytes, more than the %d allowed", ErrConfig, ref, m.Config.Size, maxManifestBytes)
	}
	var total int64
	for _, l := range m.Layers {
		switch l.MediaType {
		case types.DockerLayer, types.OCILayer, types.OCILayerZStd, types.OCIUncompressedLayer:
		default:
			return nil, fmt.Errorf("%w: %s has a layer of media type %q, which is not supported", ErrConfig, ref, l.MediaType)
		}
		if l.Size < 0 {
			return nil, fmt.Errorf("%w: %s has a layer of negative size", ErrConfig, ref)
		}
		total += l.Size
		if total > p.cfg.MaxImageBytes {
			return nil, fmt.Errorf("%w: the layers of %s are more than the %d bytes allowed", ErrConfig, ref, p.cfg.MaxImageBytes)
		}
	}
	return m, nil
}

// download makes the cache hold every blob of m, whose blobs the caller
// has pinned, from the first of srcs that serves each: the mirror that
// served the manifest, then the ones after it.
func (p *Puller) download(ctx context.Context, srcs []source, ref string, digest v1.Hash, raw []byte, m *v1.Manifest, blobs []v1.Hash) (*Pulled, error) {
	sizes := map[v1.Hash]int64{digest: int64(len(raw)), m.Config.Digest: m.Config.Size}
	for _, l := range m.Layers {
		sizes[l.Digest] = l.Size
	}
	done, err := p.cache.reserve(sizes)
	if err != nil {
		return nil, fmt.Errorf("pulling %s: %w", ref, err)
	}
	defer done()
	if err := p.cache.put(digest, raw); err != nil {
		return nil, fmt.Errorf("image: storing the manifest of %s: %w", ref, err)
	}
	g, gctx := errgroup.WithContext(ctx)
	g.SetLimit(parallelLayers)
	// One authenticated client per source serves all the blobs of the
	// pull: the registry is pinged and the token asked for once.
	clients := make([]func() (*http.Client, error), len(srcs))
	for i, src := range srcs {
		clients[i] = sync.OnceValues(func() (*http.Client, error) { return src.blobClient(gctx) })
	}
	for _, d := range append([]v1.Descriptor{m.Config}, m.Layers...) {
		g.Go(func() error {
			var err error
			for i, src := range srcs {
				err = p.cache.fetch(gctx, d.Digest, d.Size, func(ctx context.Context) (io.ReadCloser, error) {
					client, err := clients[i]()
					if err != nil {
						return nil, err
					}
					return src.openBlob(ctx, client, d.Digest)
				})
				if err == nil {
					return nil
				}
				err = p.classify(ref, src, err)
				if !src.mirror || gctx.Err() != nil {
					break
				}
				p.cfg.Logger.WarnContext(ctx, "image mirror failed", "mirror", src.repo.RegistryStr(), "blob", d.Digest.String(), "err", err)
			}
			return err
		})
	}
	if err := g.Wait(); err != nil {
		return nil, err
	}
	return p.assemble(ref, digest, m, blobs)
}

// assemble builds the Pulled of a manifest whose blobs the cache holds
// and the caller has pinned, reading the image config.
func (p *Puller) assemble(ref string, digest v1.Hash, m *v1.Manifest, blobs []v1.Hash) (*Pulled, error) {
	raw, err := readBlob(p.cache.path(m.Config.Digest))
	if err != nil {
		return nil, fmt.Errorf("image: reading the config of %s: %w", ref, err)
	}
	cf, err := v1.ParseConfigFile(bytes.NewReader(raw))
	if err != nil {
		return nil, fmt.Errorf("%w: the config of %s: %v", ErrConfig, ref, err)
	}
	if len(cf.RootFS.DiffIDs) != len(m.Layers) {
		return nil, fmt.Errorf("%w: the config of %s lists %d layers and its manifest %d", ErrConfig, ref, len(cf.RootFS.DiffIDs), len(m.Layers))
	}
	pulled := &Pulled{Image: Image{Ref: ref, Digest: digest, Config: cf.Config}}
	for i, l := range m.Layers {
		pulled.Size += l.Size
		pulled.Layers = append(pulled.Layers, Layer{
			Digest:    l.Digest,
			DiffID:    cf.RootFS.DiffIDs[i],
			MediaType: l.MediaType,
			Size:      l.Size,
			Path:      p.cache.path(l.Digest),
		})
	}
	var once sync.Once
	pulled.release = func() { once.Do(func() { p.cache.unpin(blobs) }) }
	return pulled, nil
}

// source is where an image's blobs are fetched: the repository on the
// image's registry or on one of its mirrors, with its credentials.
type source struct {
	repo      name.Repository
	auth      authn.Authenticator
	transport http.RoundTripper
	platform  v1.Platform
	mirror    bool
}

func (s source) options(ctx context.Context) []remote.Option {
	return []remote.Option{
		remote.WithContext(ctx),
		remote.WithAuth(s.auth),
		remote.WithTransport(s.transport),
		remote.WithPlatform(s.platform),
		// A failure is reported at once, classified: retrying a
		// registry that is down is the job policy's decision.
		remote.WithRetryBackoff(remote.Backoff{Steps: 1}),
	}
}

// blobClient returns a client of the source's registry authenticated
// to pull from its repository.
func (s source) blobClient(ctx context.Context) (*http.Client, error) {
	tr, err := transport.NewWithContext(ctx, s.repo.Registry, s.auth, s.transport, []string{s.repo.Scope(transport.PullScope)})
	if err != nil {
		return nil, err
	}
	return &http.Client{Transport: tr, CheckRedirect: checkRedirect}, nil
}

// openBlob starts the download of the blob d with client, a blobClient
// of s. The body is read as the registry sends it: the cache checks its
// size and digest as it stores it, the one hash computed over the
// bytes.
func (s source) openBlob(ctx context.Context, client *http.Client, d v1.Hash) (io.ReadCloser, error) {
	u := url.URL{
		Scheme: s.repo.Scheme(),
		Host:   s.repo.RegistryStr(),
		Path:   fmt.Sprintf("/v2/%s/blobs/%s", s.repo.RepositoryStr(), d),
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return nil, err
	}
	resp, err := client.Do(req)
	if err != nil {
		return nil, err
	}
	if err := transport.CheckError(resp, http.StatusOK); err != nil {
		resp.Body.Close()
		return nil, err
	}
	return resp.Body, nil
}

// maxRedirects bounds the redirects a blob download follows.
const maxRedirects = 10

// checkRedirect lets a blob download follow a registry's redirects, to
// its storage most often, but not from one host to an IP address of the
// loopback, private, link-local or unspecified ranges: a registry must
// not make the runner reach its own network's services (a cloud's
// metadata service) on its behalf. go-containerregistry's own downloads
// apply the same rule.
func checkRedirect(req *http.Request, via []*http.Request) error {
	if len(via) >= maxRedirects {
		return fmt.Errorf("stopped after %d redirects", maxRedirects)
	}
	from, to := via[0].URL.Hostname(), req.URL.Hostname()
	if to != from && internalHost(to) {
		return fmt.Errorf("refused the redirect from %s to the internal address %s", from, to)
	}
	return nil
}

// internalHost reports whether host is an IP address of the loopback,
// private, link-local or unspecified ranges, or spelled in one of the
// numeric forms of inet_aton ("127.1", "0x7f000001", "2130706433")
// that some resolvers take for an IPv4 address, whatever it names: no
// registry's storage is named so.
func internalHost(host string) bool {
	host, _, _ = strings.Cut(host, "%")
	if a, err := netip.ParseAddr(host); err == nil {
		a = a.Unmap()
		return a.IsLoopback() || a.IsPrivate() || a.IsLinkLocalUnicast() || a.IsLinkLocalMulticast() || a.IsUnspecified()
	}
	for part := range strings.SplitSeq(host, ".") {
		if _, err := strconv.ParseUint(part, 0, 32); err != nil {
			return false
		}
	}
	return true
}

// sources lists where r can be pulled from: its registry's mirrors,
// then the registry.
func (p *Puller) sources(r name.Reference, job *authn.Basic) []source {
	origin := r.Context()
	var srcs []source
	for _, host := range p.cfg.Mirrors[origin.RegistryStr()] {
		var opts []name.Option
		if p.insecure[host] {
			opts = append(opts, name.Insecure)
		}
		reg, err := name.NewRegistry(host, opts...)
		if err != nil {
			p.cfg.Logger.Warn("image mirror skipped", "mirror", host, "err", err)
			continue
		}
		srcs = append(srcs, p.source(reg.Repo(origin.RepositoryStr()), job, true))
	}
	return append(srcs, p.source(origin, job, false))
}

func (p *Puller) source(repo name.Repository, job *authn.Basic, mirror bool) source {
	return source{
		repo:      repo,
		auth:      p.creds.authenticator(repo.RegistryStr(), job, !mirror),
		transport: p.cfg.Transport,
		platform:  p.cfg.Platform,
		mirror:    mirror,
	}
}

// resolve finds the manifest of r for the platform at the first source
// that has it, and returns that source and those after it.
func (p *Puller) resolve(ctx context.Context, r name.Reference, job *authn.Basic) ([]source, v1.Hash, []byte, error) {
	var err error
	srcs := p.sources(r, job)
	for i, src := range srcs {
		var digest v1.Hash
		var raw []byte
		digest, raw, err = p.resolveAt(ctx, src, r)
		if err == nil {
			return srcs[i:], digest, raw, nil
		}
		if !src.mirror || ctx.Err() != nil {
			break
		}
		p.cfg.Logger.WarnContext(ctx, "image mirror failed", "mirror", src.repo.RegistryStr(), "ref", r.String(), "err", err)
	}
	return nil, v1.Hash{}, nil, err
}

func (p *Puller) resolveAt(ctx context.Context, src source, r name.Reference) (v1.Hash, []byte, error) {
	var at name.Reference = src.repo.Tag(r.Identifier())
	if _, ok := r.(name.Digest); ok {
		at = src.repo.Digest(r.Identifier())
	}
	desc, err := remote.Get(at, src.options(ctx)...)
	if err != nil {
		return v1.Hash{}, nil, p.classify(r.String(), src, err)
	}
	if int64(len(desc.Manifest)) > maxManifestBytes {
		return v1.Hash{}, nil, fmt.Errorf("%w: the manifest of %s is more than %d bytes", ErrConfig, r, maxManifestBytes)
	}
	switch {
	case desc.MediaType.IsImage():
		return desc.Digest, desc.Manifest, nil
	case desc.MediaType.IsIndex():
	default:
		return v1.Hash{}, nil, fmt.Errorf("%w: %s is a %q, not an image or an index", ErrConfig, r, desc.MediaType)
	}
	idx, err := v1.ParseIndexManifest(bytes.NewReader(desc.Manifest))
	if err != nil {
		return v1.Hash{}, nil, fmt.Errorf("%w: the index of %s: %v", ErrConfig, r, err)
	}
	var have []string
	for _, m := range idx.Manifests {
		if m.Platform == nil || !m.MediaType.IsImage() {
			continue
		}
		if !m.Platform.Satisfies(p.cfg.Platform) {
			have = append(have, m.Platform.String())
			continue
		}
		child, err := remote.Get(src.repo.Digest(m.Digest.String()), src.options(ctx)...)
		if err != nil {
			return v1.Hash{}, nil, p.classify(r.String(), src, err)
		}
		if !child.MediaType.IsImage() || int64(len(child.Manifest)) > maxManifestBytes {
			return v1.Hash{}, nil, fmt.Errorf("%w: the %s manifest of %s is not an image manifest", ErrConfig, p.cfg.Platform, r)
		}
		return child.Digest, child.Manifest, nil
	}
	slices.Sort(have)
	return v1.Hash{}, nil, fmt.Errorf("%w: %s has no manifest for %s; it has %s", ErrConfig, r, p.cfg.Platform, cmp.Or(strings.Join(slices.Compact(have), ", "), "none with a platform"))
}

// classify wraps err from a registry with its failure class.
func (p *Puller) classify(ref string, src source, err error) error {
	if errors.Is(err, ErrConfig) || errors.Is(err, ErrRegistry) || errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	class := ErrRegistry
	var te *transport.Error
	if errors.As(err, &te) {
		switch {
		case te.StatusCode == http.StatusTooManyRequests || te.StatusCode >= 500:
		case te.StatusCode >= 400:
			class = ErrConfig
		}
		for _, d := range te.Errors {
			switch d.Code {
			case transport.ManifestUnknownErrorCode, transport.NameUnknownErrorCode, transport.BlobUnknownErrorCode,
				transport.UnauthorizedErrorCode, transport.DeniedErrorCode, transport.NameInvalidErrorCode,
				transport.TagInvalidErrorCode, transport.ManifestInvalidErrorCode:
				class = ErrConfig
			}
		}
	}
	return fmt.Errorf("%w: pulling %s from %s: %w", class, ref, src.repo.RegistryStr(), err)
}
