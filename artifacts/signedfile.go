package artifacts

import (
	"context"
	"crypto/hmac"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/cikit/cikit"
)

// MinSigningKeyLen is the shortest key a SignedFileStore signs with.
const MinSigningKeyLen = 32

// Query parameters of the requests a SignedFileStore signs.
const (
	queryExpires   = "expires"
	querySize      = "size"
	querySHA256    = "sha256"
	querySignature = "signature"
)

// SignedFileStore is a Presigner over a FileStore: it signs requests with
// HMAC-SHA256 under a key of its own, and its Handler serves them, so
// that runners send blobs to the platform's server directly, as they
// would to S3.
//
// A signature covers the method, the blob key, the expiry and, for a
// PUT, the body's size and SHA-256. The handler refuses a PUT whose
// body differs (nothing is stored) and a PUT of a key that already holds
// a blob (409): finalized blobs are immutable, so a replayed request
// cannot overwrite one. It has no multipart uploads.
//
// Only one SignedFileStore may serve the uploads of a directory: the
// check that a key holds no blob is made under a lock of its own.
type SignedFileStore struct {
	// Now is the clock by which signatures expire; nil is time.Now. Set
	// it before the store is used.
	Now func() time.Time

	store *FileStore
	key   []byte
	base  *url.URL

	// putting holds the keys being uploaded, so that two uploads of one
	// key cannot both find it free.
	putting sync.Map
}

var _ Presigner = (*SignedFileStore)(nil)

// NewSignedFileStore returns a store that signs requests to store's
// blobs with key (at least MinSigningKeyLen bytes) under baseURL, an
// absolute http or https URL such as "http://host:8080/v1/blobs" where
// Handler is mounted.
func NewSignedFileStore(store *FileStore, key []byte, baseURL string) (*SignedFileStore, error) {
	if store == nil {
		return nil, errors.New("the FileStore of a SignedFileStore must not be nil")
	}
	if len(key) < MinSigningKeyLen {
		return nil, fmt.Errorf("the signing key is %d bytes long, expected at least %d", len(key), MinSigningKeyLen)
	}
	u, err := url.Parse(baseURL)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("the base URL %q must be an absolute http or https URL without query", baseURL)
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	u.RawPath = ""
	return &SignedFileStore{store: store, key: append([]byte(nil), key...), base: u}, nil
}

func (s *SignedFileStore) now() time.Time {
	if s.Now != nil {
		return s.Now()
	}
	return time.Now()
}

// Put implements BlobStore.
func (s *SignedFileStore) Put(ctx context.Context, key string, r io.Reader, size int64) error {
	return s.store.Put(ctx, key, r, size)
}

// Get implements BlobStore.
func (s *SignedFileStore) Get(ctx context.Context, key string) (io.ReadCloser, error) {
	return s.store.Get(ctx, key)
}

// Delete implements BlobStore.
func (s *SignedFileStore) Delete(ctx context.Context, key string) error {
	return s.store.Delete(ctx, key)
}

// Stat implements BlobStore.
func (s *SignedFileStore) Stat(ctx context.Context, key string) (BlobInfo, error) {
	return s.store.Stat(ctx, key)
}

// PresignPut implements Presigner.
func (s *SignedFileStore) PresignPut(_ context.Context, key string, size int64, sha string, ttl time.Duration) (Request, error) {
	if err := ValidateKey(key); err != nil {
		return Request{}, err
	}
	if _, err := checksumOf(size, sha); err != nil {
		return Request{}, fmt.Errorf("presign put %s: %w", key, err)
	}
	if ttl <= 0 {
		return Request{}, fmt.Errorf("presign put %s: the validity %v must be positive", key, ttl)
	}
	return Request{Method: http.MethodPut, URL: s.sign(http.MethodPut, key, ttl, size, sha), Size: size, SHA256: sha}, nil
}

// PresignGet implements Presigner.
func (s *SignedFileStore) PresignGet(_ context.Context, key string, ttl time.Duration) (Request, error) {
	if err := ValidateKey(key); err != nil {
		return Request{}, err
	}
	if ttl <= 0 {
		return Request{}, fmt.Errorf("presign get %s: the validity %v must be positive", key, ttl)
	}
	return Request{Method: http.MethodGet, URL: s.sign(http.MethodGet, key, ttl, 0, "")}, nil
}

// CreateMultipart implements Presigner: ErrNoMultipart.
func (s *SignedFileStore) CreateMultipart(context.Context, string, []int64, []string, time.Duration) (string, []Request, error) {
	return "", nil, ErrNoMultipart
}

// CompleteMultipart implements Presigner: ErrNoMultipart.
func (s *SignedFileStore) CompleteMultipart(context.Context, string, string, []string) error {
	return ErrNoMultipart
}

// AbortMultipart implements Presigner: there is no upload to abort.
func (s *SignedFileStore) AbortMultipart(context.Context, string, string) error { return nil }

// MultipartMin implements Presigner: zero, never in parts.
func (s *SignedFileStore) MultipartMin() int64 { return 0 }

// PartSize implements Presigner: zero.
func (s *SignedFileStore) PartSize() int64 { return 0 }

// Verify implements Presigner: it reads the blob and hashes it.
func (s *SignedFileStore) Verify(ctx context.Context, key string, size int64, sha string) error {
	if _, err := checksumOf(size, sha); err != nil {
		return fmt.Errorf("verify %s: %w", key, err)
	}
	info, err := s.store.Stat(ctx, key)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	if info.Size != size {
		return fmt.Errorf("verify %s: %w: the blob is %d bytes long, expected %d", key, ErrRefused, info.Size, size)
	}
	r, err := s.store.Get(ctx, key)
	if err != nil {
		return fmt.Errorf("verify: %w", err)
	}
	defer r.Close()
	return checkBlob(key, r, size, sha)
}

// sign returns the URL of a signed request.
func (s *SignedFileStore) sign(method, key string, ttl time.Duration, size int64, sha string) string {
	expires := s.now().Add(ttl).Unix()
	q := url.Values{}
	q.Set(queryExpires, strconv.FormatInt(expires, 10))
	if method == http.MethodPut {
		q.Set(querySize, strconv.FormatInt(size, 10))
		q.Set(querySHA256, sha)
	}
	q.Set(querySignature, hex.EncodeToString(s.mac(method, key, expires, size, sha)))
	u := *s.base
	u.Path = s.base.Path + "/" + key
	u.RawQuery = q.Encode()
	return u.String()
}

// mac is the signature of a request. Its fields are separated by
// newlines, which no key, number or digest holds.
func (s *SignedFileStore) mac(method, key string, expires, size int64, sha string) []byte {
	m := hmac.New(sha256.New, s.key)
	fmt.Fprintf(m, "%s\n%s\n%d\n%d\n%s", method, key, expires, size, sha)
	return m.Sum(nil)
}

// Handler returns the handler of the requests the store signs, to be
// mounted at the base URL's path (it serves that path's subtree).
//
// It streams bodies: an upload is read through a hashing reader, never
// more than its signed size, and a download is copied from the file.
// Slow clients are the server's to bound: mount it in an http.Server
// with a ReadTimeout (or ReadHeaderTimeout and a per-request deadline)
// fitting the largest blob at the slowest accepted rate.
func (s *SignedFileStore) Handler() http.Handler {
	return http.HandlerFunc(s.serve)
}

// signedRequest is a request's checked query.
type signedRequest struct {
	key  string
	size int64
	sha  string
}

func (s *SignedFileStore) serve(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodPut {
		w.Header().Set("Allow", "GET, PUT")
		http.Error(w, fmt.Sprintf("method %s is not allowed: a signed request is a GET or a PUT", r.Method), http.StatusMethodNotAllowed)
		return
	}
	req, status, msg := s.check(r)
	if status != 0 {
		http.Error(w, msg, status)
		return
	}
	if r.Method == http.MethodGet {
		s.serveGet(w, r, req)
		return
	}
	s.servePut(w, r, req)
}

// check checks a request's key, signature and expiry, and returns the
// status and message of its refusal, if any.
func (s *SignedFileStore) check(r *http.Request) (signedRequest, int, string) {
	prefix := s.base.Path + "/"
	if !strings.HasPrefix(r.URL.Path, prefix) {
		return signedRequest{}, http.StatusNotFound, fmt.Sprintf("the path %q is not under %s", r.URL.Path, prefix)
	}
	req := signedRequest{key: strings.TrimPrefix(r.URL.Path, prefix)}
	if err := ValidateKey(req.key); err != nil {
		return req, http.StatusBadRequest, err.Error()
	}
	q := r.URL.Query()
	sig, err := hex.DecodeString(q.Get(querySignature))
	if err != nil || len(sig) != sha256.Size {
		return req, http.StatusForbidden, "the request has no valid signature: the signature parameter must be 64 hex digits"
	}
	expires, err := strconv.ParseInt(q.Get(queryExpires), 10, 64)
	if err != nil {
		return req, http.StatusForbidden, "the request has no valid expiry: the expires parameter must be a Unix time"
	}
	if r.Method == http.MethodPut {
		if req.size, err = strconv.ParseInt(q.Get(querySize), 10, 64); err != nil || req.size < 0 {
			return req, http.StatusForbidden, "the request has no valid size: the size parameter must be a number of bytes"
		}
		req.sha = q.Get(querySHA256)
	}
	if !hmac.Equal(sig, s.mac(r.Method, req.key, expires, req.size, req.sha)) {
		return req, http.StatusForbidden, "the signature does not match the request"
	}
	if !s.now().Before(time.Unix(expires, 0)) {
		return req, http.StatusForbidden, fmt.Sprintf("the request expired at %s", time.Unix(expires, 0).UTC().Format(time.RFC3339))
	}
	return req, 0, ""
}

func (s *SignedFileStore) serveGet(w http.ResponseWriter, r *http.Request, req signedRequest) {
	info, err := s.store.Stat(r.Context(), req.key)
	if err != nil {
		s.fail(w, err)
		return
	}
	f, err := s.store.Get(r.Context(), req.key)
	if err != nil {
		s.fail(w, err)
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(info.Size, 10))
	w.WriteHeader(http.StatusOK)
	// A blob replaced in between would be longer or shorter than the
	// Content-Length sent; Put of the handler never replaces one.
	_, _ = io.CopyN(w, f, info.Size)
}

func (s *SignedFileStore) servePut(w http.ResponseWriter, r *http.Request, req signedRequest) {
	if r.ContentLength < 0 {
		http.Error(w, fmt.Sprintf("the request has no Content-Length, expected the signed size %d", req.size), http.StatusLengthRequired)
		return
	}
	if r.ContentLength != req.size {
		http.Error(w, fmt.Sprintf("the Content-Length is %d, expected the signed size %d", r.ContentLength, req.size), http.StatusBadRequest)
		return
	}
	if _, busy := s.putting.LoadOrStore(req.key, struct{}{}); busy {
		http.Error(w, fmt.Sprintf("blob %s is being uploaded by another request", req.key), http.StatusConflict)
		return
	}
	defer s.putting.Delete(req.key)
	switch _, err := s.store.Stat(r.Context(), req.key); {
	case err == nil:
		http.Error(w, fmt.Sprintf("blob %s is already stored, and stored blobs are immutable", req.key), http.StatusConflict)
		return
	case !errors.Is(err, cikit.ErrNotFound):
		s.fail(w, err)
		return
	}
	body := &verifyingReader{r: r.Body, h: sha256.New(), size: req.size, sha: req.sha}
	err := s.store.Put(r.Context(), req.key, body, req.size)
	switch {
	case body.err != nil:
		http.Error(w, body.err.Error(), http.StatusBadRequest)
	case errors.Is(err, ErrWrongSize):
		http.Error(w, fmt.Sprintf("the body is not the signed %d bytes: %v", req.size, err), http.StatusBadRequest)
	case err != nil && body.readErr != nil:
		http.Error(w, fmt.Sprintf("reading the body: %v", body.readErr), http.StatusBadRequest)
	case err != nil:
		s.fail(w, err)
	default:
		w.Header().Set("ETag", `"`+req.sha+`"`)
		w.WriteHeader(http.StatusOK)
	}
}

// fail answers a store's error.
func (s *SignedFileStore) fail(w http.ResponseWriter, err error) {
	if errors.Is(err, cikit.ErrNotFound) {
		http.Error(w, "no such blob", http.StatusNotFound)
		return
	}
	http.Error(w, "the blob store failed", http.StatusInternalServerError)
}

// verifyingReader hashes an upload's body and fails at its end, before
// FileStore.Put commits the blob, when its digest is not the signed one.
type verifyingReader struct {
	r    io.Reader
	h    hash.Hash
	size int64
	sha  string
	n    int64
	// err is the digest mismatch found, readErr the body's own error.
	err     error
	readErr error
}

func (v *verifyingReader) Read(p []byte) (int, error) {
	if v.err != nil {
		return 0, v.err
	}
	n, err := v.r.Read(p)
	v.h.Write(p[:n])
	v.n += int64(n)
	switch {
	case err == io.EOF && v.n == v.size:
		if got := hex.EncodeToString(v.h.Sum(nil)); got != v.sha {
			v.err = fmt.Errorf("the body's SHA-256 is %s, expected the signed %s", got, v.sha)
			return n, v.err
		}
	case err != nil && err != io.EOF:
		v.readErr = err
	}
	return n, err
}
