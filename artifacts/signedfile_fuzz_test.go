package artifacts_test

import (
	"bytes"
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
		if pu == put.URL || pu == get.URL {
			return // signed
		}
		req := httptest.NewRequestWithContext(t.Context(), method, pu, bytes.NewReader(body))
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
