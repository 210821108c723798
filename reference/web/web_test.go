package web_test

import (
	"encoding/json"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"strings"
	"testing"

	"github.com/cikit/cikit/reference/web"
)

func get(t *testing.T, h http.Handler, method, path string, header http.Header) (*http.Response, string) {
	t.Helper()
	req := httptest.NewRequest(method, path, nil)
	for k, v := range header {
		req.Header[k] = v
	}
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	res := rec.Result()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatal(err)
	}
	return res, string(body)
}

func TestIndexForPagePaths(t *testing.T) {
	u := web.New(web.Config{})
	for _, path := range []string{"/", "/runs/run-1", "/runs/run-1/jobs/test%20(linux,%2020)", "/somewhere/else?x=1"} {
		res, body := get(t, u, http.MethodGet, path, nil)
		if res.StatusCode != http.StatusOK {
			t.Fatalf("GET %s: %s", path, res.Status)
		}
		if ct := res.Header.Get("Content-Type"); ct != "text/html; charset=utf-8" {
			t.Errorf("GET %s: Content-Type %q", path, ct)
		}
		if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
			t.Errorf("GET %s: Cache-Control %q, want no-cache", path, cc)
		}
		if csp := res.Header.Get("Content-Security-Policy"); !strings.Contains(csp, "default-src 'self'") {
			t.Errorf("GET %s: Content-Security-Policy %q", path, csp)
		}
		for _, want := range []string{
			`<meta name="cikit-api" content="/api/v1">`,
			`<script type="module" src="/assets/` + u.Version() + `/app.js">`,
		} {
			if !strings.Contains(body, want) {
				t.Errorf("GET %s: the page lacks %s", path, want)
			}
		}
	}
	res, body := get(t, u, http.MethodHead, "/runs/x", nil)
	if res.StatusCode != http.StatusOK || body != "" {
		t.Errorf("HEAD: %s with %d bytes", res.Status, len(body))
	}
	res, _ = get(t, u, http.MethodPost, "/", nil)
	if res.StatusCode != http.StatusMethodNotAllowed || res.Header.Get("Allow") != "GET, HEAD" {
		t.Errorf("POST /: %s, Allow %q", res.Status, res.Header.Get("Allow"))
	}
}

// The index page names its assets and each module imports others; every
// one of them is served, with its content type, cached for good.
func TestAssetsReachable(t *testing.T) {
	u := web.New(web.Config{})
	_, index := get(t, u, http.MethodGet, "/", nil)
	prefix := "/assets/" + u.Version() + "/"
	refs := regexp.MustCompile(`"`+regexp.QuoteMeta(prefix)+`([^"]+)"`).FindAllStringSubmatch(index, -1)
	if len(refs) != 3 {
		t.Fatalf("the index names %d assets, want 3 (icon, style, app): %q", len(refs), refs)
	}
	imports := regexp.MustCompile(`(?m)^import .* from '\./([^']+)';$`)
	types := map[string]string{".js": "text/javascript; charset=utf-8", ".css": "text/css; charset=utf-8", ".svg": "image/svg+xml"}
	seen := make(map[string]bool)
	var queue []string
	for _, r := range refs {
		queue = append(queue, r[1])
	}
	for len(queue) > 0 {
		name := queue[0]
		queue = queue[1:]
		if seen[name] {
			continue
		}
		seen[name] = true
		res, body := get(t, u, http.MethodGet, prefix+name, nil)
		if res.StatusCode != http.StatusOK {
			t.Errorf("%s: %s", name, res.Status)
			continue
		}
		ext := name[strings.LastIndex(name, "."):]
		if ct := res.Header.Get("Content-Type"); ct != types[ext] {
			t.Errorf("%s: Content-Type %q, want %q", name, ct, types[ext])
		}
		if cc := res.Header.Get("Cache-Control"); cc != "public, max-age=31536000, immutable" {
			t.Errorf("%s: Cache-Control %q", name, cc)
		}
		for _, m := range imports.FindAllStringSubmatch(body, -1) {
			queue = append(queue, m[1])
		}
		etag := res.Header.Get("ETag")
		res, _ = get(t, u, http.MethodGet, prefix+name, http.Header{"If-None-Match": {etag}})
		if etag == "" || res.StatusCode != http.StatusNotModified {
			t.Errorf("%s: with If-None-Match %s: %s", name, etag, res.Status)
		}
	}
	// Every asset is used.
	files, err := fs.Glob(os.DirFS("assets"), "*")
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range files {
		if !seen[f] {
			t.Errorf("asset %s is neither named by the index nor imported", f)
		}
	}
}

func TestAssetOfAnotherVersion(t *testing.T) {
	u := web.New(web.Config{})
	res, body := get(t, u, http.MethodGet, "/assets/0123456789ab/app.js", nil)
	if res.StatusCode != http.StatusOK || !strings.Contains(body, "import") {
		t.Fatalf("app.js of an old version: %s", res.Status)
	}
	if cc := res.Header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control %q, want no-cache", cc)
	}
}

func TestNotFound(t *testing.T) {
	u := web.New(web.Config{})
	v := u.Version()
	for _, path := range []string{
		"/assets/" + v + "/nope.js",
		"/assets/" + v + "/",
		"/assets/" + v,
		"/assets/",
		"/assets/" + v + "/../index.html",
		"/assets//app.js",
	} {
		res, body := get(t, u, http.MethodGet, path, nil)
		if res.StatusCode != http.StatusNotFound {
			t.Errorf("GET %s: %s, want 404", path, res.Status)
		}
		if strings.Contains(body, "<a href") || strings.Contains(body, "cikit-api") {
			t.Errorf("GET %s: a listing or the index instead of 404: %.80q", path, body)
		}
	}
}

func TestAPIPathsAreNotPages(t *testing.T) {
	for _, tc := range []struct {
		prefix   string
		api, ui  string
		wantMeta string
	}{
		{"", "/api/v1/runs/nope", "/api/v2/runs", `content="/api/v1"`},
		{"/api/v2/", "/api/v2/runs/nope", "/api/v1/runs", `content="/api/v2"`},
	} {
		u := web.New(web.Config{APIPrefix: tc.prefix})
		for _, method := range []string{http.MethodGet, http.MethodPost} {
			res, body := get(t, u, method, tc.api, nil)
			var e struct{ Error string }
			if res.StatusCode != http.StatusNotFound || json.Unmarshal([]byte(body), &e) != nil || e.Error == "" {
				t.Errorf("prefix %q: %s %s: %s %q, want 404 with an API error", tc.prefix, method, tc.api, res.Status, body)
			}
		}
		res, body := get(t, u, http.MethodGet, tc.ui, nil)
		if res.StatusCode != http.StatusOK || !strings.Contains(body, tc.wantMeta) {
			t.Errorf("prefix %q: GET %s: %s, want the index naming the API %s", tc.prefix, tc.ui, res.Status, tc.wantMeta)
		}
	}
}
