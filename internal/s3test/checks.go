package s3test

import (
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"fmt"
	"hash"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// checks is the middleware in front of gofakes3 that holds requests to
// what AWS checks and gofakes3 does not (see the package's doc).
type checks struct {
	next http.Handler
	now  func() time.Time

	mu sync.Mutex
	// sums holds the SHA-256 checksums (base64) of objects put in one
	// request with x-amz-checksum-sha256, with the ETag that the PUT was
	// answered with: a checksum whose object's ETag has changed since is
	// stale (the object was overwritten or deleted).
	sums map[string]objectSum
}

type objectSum struct {
	sha256 string
	etag   string
}

func (c *checks) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if q := r.URL.Query(); q.Has("X-Amz-Date") && q.Has("X-Amz-Expires") {
		if msg := c.expired(q.Get("X-Amz-Date"), q.Get("X-Amz-Expires")); msg != "" {
			writeError(w, http.StatusForbidden, "AccessDenied", msg)
			return
		}
	}
	q := r.URL.Query()
	switch {
	case r.Method == http.MethodPut && r.Header.Get("X-Amz-Copy-Source") == "" && !q.Has("tagging") && !q.Has("acl"):
		c.put(w, r, q.Has("uploadId"))
	case (r.Method == http.MethodGet || r.Method == http.MethodHead) &&
		strings.EqualFold(r.Header.Get("X-Amz-Checksum-Mode"), "ENABLED") && r.Header.Get("Range") == "":
		sw := &sumWriter{ResponseWriter: w, c: c, path: r.URL.Path}
		c.next.ServeHTTP(sw, r)
		if !sw.done {
			sw.WriteHeader(http.StatusOK)
		}
	default:
		c.next.ServeHTTP(w, r)
	}
}

// expired checks the validity of a presigned request, and says why it
// is over.
func (c *checks) expired(date, expires string) string {
	t, err := time.Parse("20060102T150405Z", date)
	if err != nil {
		return fmt.Sprintf("X-Amz-Date %q is not a date of the form 20060102T150405Z", date)
	}
	secs, err := strconv.ParseInt(expires, 10, 64)
	if err != nil || secs < 0 {
		return fmt.Sprintf("X-Amz-Expires %q is not a number of seconds", expires)
	}
	if c.now().After(t.Add(time.Duration(secs) * time.Second)) {
		return "Request has expired"
	}
	return ""
}

// put serves a PUT of an object or of a part: with a checksum, the body
// must match it, or nothing is stored.
func (c *checks) put(w http.ResponseWriter, r *http.Request, part bool) {
	want := r.Header.Get("X-Amz-Checksum-Sha256")
	// gofakes3 would keep the checksum headers as the object's metadata,
	// and merge them into that of a later PUT of the key.
	stripChecksums(r.Header)
	streaming := strings.HasPrefix(r.Header.Get("X-Amz-Content-Sha256"), "STREAMING-")
	if want == "" || streaming {
		if !part {
			c.forget(r.URL.Path)
		}
		c.next.ServeHTTP(w, r)
		return
	}
	if b, err := base64.StdEncoding.DecodeString(want); err != nil || len(b) != sha256.Size {
		writeError(w, http.StatusBadRequest, "InvalidRequest", "Value for x-amz-checksum-sha256 header is invalid.")
		return
	}
	body := &digestReader{r: r.Body, h: sha256.New(), want: want}
	r.Body = body
	dw := &digestWriter{ResponseWriter: w, body: body}
	c.next.ServeHTTP(dw, r)
	if !dw.done {
		dw.WriteHeader(http.StatusOK)
	}
	switch {
	case body.mismatch:
		return
	case part:
	case dw.status == http.StatusOK:
		c.mu.Lock()
		c.sums[r.URL.Path] = objectSum{sha256: want, etag: dw.Header().Get("ETag")}
		c.mu.Unlock()
	default:
		c.forget(r.URL.Path)
	}
}

func (c *checks) forget(path string) {
	c.mu.Lock()
	delete(c.sums, path)
	c.mu.Unlock()
}

// errBadDigest fails the read of a body whose digest differs from its
// x-amz-checksum-sha256, so that gofakes3 stores nothing.
var errBadDigest = errors.New("the body does not match x-amz-checksum-sha256")

// digestReader hashes a body and, at its end, fails in place of io.EOF
// when the digest is not the one wanted.
type digestReader struct {
	r        io.ReadCloser
	h        hash.Hash
	want     string
	mismatch bool
}

func (d *digestReader) Read(p []byte) (int, error) {
	if d.mismatch {
		return 0, errBadDigest
	}
	n, err := d.r.Read(p)
	d.h.Write(p[:n])
	if err == io.EOF && base64.StdEncoding.EncodeToString(d.h.Sum(nil)) != d.want {
		d.mismatch = true
		return n, errBadDigest
	}
	return n, err
}

func (d *digestReader) Close() error { return d.r.Close() }

// digestWriter answers 400 BadDigest in place of gofakes3's answer once
// the body was found not to match its checksum.
type digestWriter struct {
	http.ResponseWriter
	body   *digestReader
	status int
	done   bool
}

func (d *digestWriter) WriteHeader(status int) {
	if d.done {
		return
	}
	d.done = true
	d.status = status
	if d.body.mismatch {
		writeError(d.ResponseWriter, http.StatusBadRequest, "BadDigest",
			"The SHA256 you specified did not match the calculated checksum.")
		return
	}
	d.ResponseWriter.WriteHeader(status)
}

func (d *digestWriter) Write(p []byte) (int, error) {
	if !d.done {
		d.WriteHeader(http.StatusOK)
	}
	if d.body.mismatch {
		return len(p), nil
	}
	return d.ResponseWriter.Write(p)
}

// sumWriter adds the remembered checksum of an object to the answer of
// a HEAD or GET with x-amz-checksum-mode ENABLED.
type sumWriter struct {
	http.ResponseWriter
	c    *checks
	path string
	done bool
}

func (s *sumWriter) WriteHeader(status int) {
	if s.done {
		return
	}
	s.done = true
	stripChecksums(s.Header())
	if status == http.StatusOK {
		s.c.mu.Lock()
		sum, ok := s.c.sums[s.path]
		s.c.mu.Unlock()
		if ok && sum.etag != "" && sum.etag == s.Header().Get("ETag") {
			s.Header().Set("X-Amz-Checksum-Sha256", sum.sha256)
			s.Header().Set("X-Amz-Checksum-Type", "FULL_OBJECT")
		}
	}
	s.ResponseWriter.WriteHeader(status)
}

func (s *sumWriter) Write(p []byte) (int, error) {
	if !s.done {
		s.WriteHeader(http.StatusOK)
	}
	return s.ResponseWriter.Write(p)
}

// stripChecksums deletes the x-amz-checksum-* headers of h.
func stripChecksums(h http.Header) {
	for k := range h {
		if strings.HasPrefix(k, "X-Amz-Checksum-") {
			delete(h, k)
		}
	}
}

// writeError writes an S3 error answer.
func writeError(w http.ResponseWriter, status int, code, msg string) {
	w.Header().Set("Content-Type", "application/xml")
	w.WriteHeader(status)
	fmt.Fprintf(w, `<?xml version="1.0" encoding="UTF-8"?>`+"\n<Error><Code>%s</Code><Message>%s</Message></Error>", code, msg)
}
