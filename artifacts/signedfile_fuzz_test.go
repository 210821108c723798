package artifacts_test

import (
	"bytes"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/cikit/cikit/artifacts"
)

// FuzzSignedFileStoreHandler sends the handler requests of any method,
// path, query and body. Invariant: a request the store did not sign is
// answered with a 4xx (never a 5xx, never a success) and stores nothing.
func FuzzSignedFileStoreHandler(f *testing.F) {
	dir := filepath.Join(f.TempDir(), "blobs")
	files, err := artifacts.NewFileStore(dir)
	if err != nil {
		f.Fatal(err)
	}
	store, err := artifacts.NewSignedFileStore(files, bytes.Repeat([]byte("k"), 32), "http://blobs.test/v1/blobs")
	if err != nil {
		f.Fatal(err)
	}
	body := []byte("body")
	put, err := store.PresignPut(f.Context(), "a/b", int64(len(body)), sha(body), time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	get, err := store.PresignGet(f.Context(), "a/b", time.Hour)
	if err != nil {
		f.Fatal(err)
	}
	for _, u := range []string{put.URL, get.URL} {
		pu, err := url.Parse(u)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(true, pu.EscapedPath(), pu.RawQuery, body)
		f.Add(false, pu.EscapedPath(), pu.RawQuery, []byte(nil))
		f.Add(true, pu.EscapedPath()+"c", pu.RawQuery, body)
		f.Add(true, pu.EscapedPath(), strings.Replace(pu.RawQuery, "size=4", "size=5", 1), append(body, 'x'))
	}
	f.Add(true, "/v1/blobs/%2e%2e/x", "expires=99999999999&size=1&sha256=00&signature=00", []byte("x"))
	h := store.Handler()
	f.Fuzz(func(t *testing.T, isPut bool, path, query string, body []byte) {
		method := http.MethodGet
		if isPut {
			method = http.MethodPut
		}
		u, err := url.Parse("http://blobs.test" + path + "?" + query)
		if err != nil || !strings.HasPrefix(u.Path, "/") {
			return
		}
		pu := "http://blobs.test" + u.EscapedPath() + "?" + u.RawQuery
		if sameRequest(u, put.URL) || sameRequest(u, get.URL) {
			return // signed
		}
		req := (&http.Request{
			Method:        method,
			URL:           u,
			Proto:         "HTTP/1.1",
			ProtoMajor:    1,
			ProtoMinor:    1,
			Header:        http.Header{},
			Body:          io.NopCloser(bytes.NewReader(body)),
			ContentLength: int64(len(body)),
			Host:          u.Host,
		}).WithContext(t.Context())
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code < 400 || rec.Code >= 500 {
			t.Fatalf("%s %s: status %d, expected a 4xx: %s", method, pu, rec.Code, rec.Body)
		}
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && !d.IsDir() {
				t.Fatalf("%s %s stored %s", method, pu, p)
			}
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
	})
}

// sameRequest reports whether u has the path and signed parameters of
// the signed URL signed.
func sameRequest(u *url.URL, signed string) bool {
	s, _ := url.Parse(signed)
	if u.Path != s.Path {
		return false
	}
	q, sq := u.Query(), s.Query()
	for _, k := range []string{"expires", "size", "sha256", "signature"} {
		if q.Get(k) != sq.Get(k) {
			return false
		}
	}
	return true
}
