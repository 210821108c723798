package web

import (
	"bytes"
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"html/template"
	"io/fs"
	"net/http"
	"path"
	"slices"
	"strings"
	"time"
)

//go:embed assets index.html
var files embed.FS

// AssetsPath is the path under which the UI serves its files.
const AssetsPath = "/assets/"

// DefaultAPIPrefix is the path of the JSON API the UI reads, unless
// Config.APIPrefix says otherwise.
const DefaultAPIPrefix = "/api/v1"

// Config configures a UI. The zero value is ready to use.
type Config struct {
	// APIPrefix is the absolute path under which the JSON API is served,
	// without a trailing slash. Default: DefaultAPIPrefix.
	APIPrefix string
}

// UI serves the web UI. It is safe for concurrent use.
type UI struct {
	apiPrefix string
	version   string
	index     asset
	assets    map[string]asset // by name under assets/
}

// asset is a file the UI serves, prepared once.
type asset struct {
	body        []byte
	contentType string
	etag        string
}

// contentTypes are the types of the assets by extension; they are fixed
// here rather than read from the system's MIME tables, which vary.
var contentTypes = map[string]string{
	".css":  "text/css; charset=utf-8",
	".html": "text/html; charset=utf-8",
	".js":   "text/javascript; charset=utf-8",
	".svg":  "image/svg+xml",
}

// Handler returns a UI with the default Config.
func Handler() http.Handler { return New(Config{}) }

// New returns a UI. It panics if the embedded files are inconsistent,
// which the package's tests rule out.
func New(cfg Config) *UI {
	u := &UI{apiPrefix: strings.TrimSuffix(cfg.APIPrefix, "/"), assets: make(map[string]asset)}
	if u.apiPrefix == "" {
		u.apiPrefix = DefaultAPIPrefix
	}
	if err := u.load(); err != nil {
		panic(fmt.Sprintf("web: embedded files: %v", err))
	}
	return u
}

// load prepares the assets and renders the index page.
func (u *UI) load() error {
	sub, err := fs.Sub(files, "assets")
	if err != nil {
		return err
	}
	var names []string
	err = fs.WalkDir(sub, ".", func(name string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		names = append(names, name)
		return nil
	})
	if err != nil {
		return err
	}
	slices.Sort(names)
	all := sha256.New()
	for _, name := range names {
		body, err := fs.ReadFile(sub, name)
		if err != nil {
			return err
		}
		ct, ok := contentTypes[path.Ext(name)]
		if !ok {
			return fmt.Errorf("asset %s: no content type for its extension", name)
		}
		u.assets[name] = newAsset(body, ct)
		fmt.Fprintf(all, "%s\x00%d\x00", name, len(body))
		all.Write(body)
	}
	u.version = hex.EncodeToString(all.Sum(nil))[:12]

	tmpl, err := template.ParseFS(files, "index.html")
	if err != nil {
		return err
	}
	var b bytes.Buffer
	err = tmpl.Execute(&b, struct{ Assets, API string }{AssetsPath + u.version, u.apiPrefix})
	if err != nil {
		return err
	}
	u.index = newAsset(b.Bytes(), contentTypes[".html"])
	return nil
}

func newAsset(body []byte, contentType string) asset {
	sum := sha256.Sum256(body)
	return asset{body: body, contentType: contentType, etag: `"` + hex.EncodeToString(sum[:8]) + `"`}
}

// Version is the version in the current asset URLs: a digest of the
// assets, which changes whenever one does.
func (u *UI) Version() string { return u.version }

// ServeHTTP answers GET and HEAD: API paths with 404, asset paths with
// the asset or 404, every other path with the index page.
func (u *UI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("X-Content-Type-Options", "nosniff")
	p := r.URL.Path
	if p == u.apiPrefix || strings.HasPrefix(p, u.apiPrefix+"/") {
		h.Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusNotFound)
		fmt.Fprintf(w, "{\"error\":%q}\n", "no API route "+p)
		return
	}
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		h.Set("Allow", "GET, HEAD")
		http.Error(w, "method not allowed", http.StatusMethodNotAllowed)
		return
	}
	if rest, ok := strings.CutPrefix(p, AssetsPath); ok {
		u.serveAsset(w, r, rest)
		return
	}
	h.Set("Content-Security-Policy", "default-src 'self'; img-src 'self' data:; base-uri 'none'; form-action 'self'; frame-ancestors 'none'")
	h.Set("Referrer-Policy", "same-origin")
	h.Set("Cache-Control", "no-cache")
	serve(w, r, u.index)
}

// serveAsset serves rest, "<version>/<name>", of an asset path.
func (u *UI) serveAsset(w http.ResponseWriter, r *http.Request, rest string) {
	version, name, ok := strings.Cut(rest, "/")
	a, found := u.assets[name]
	if !ok || version == "" || !found {
		http.NotFound(w, r)
		return
	}
	if version == u.version {
		w.Header().Set("Cache-Control", "public, max-age=31536000, immutable")
	} else {
		// A page of an earlier version asks: it gets today's file, which
		// it must not keep.
		w.Header().Set("Cache-Control", "no-cache")
	}
	serve(w, r, a)
}

// serve writes a, answering conditional and range requests.
func serve(w http.ResponseWriter, r *http.Request, a asset) {
	w.Header().Set("Content-Type", a.contentType)
	w.Header().Set("ETag", a.etag)
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(a.body))
}
