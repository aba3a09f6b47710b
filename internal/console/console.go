package console

import (
	"crypto/sha256"
	"embed"
	"encoding/hex"
	"fmt"
	"io/fs"
	"mime"
	"net/http"
	"path"
	"regexp"
	"sort"
	"strconv"
	"strings"
	"sync"
)

//go:embed assets
var embedded embed.FS

// Security headers of every console response.
const (
	CSP = "default-src 'self'; script-src 'self'; style-src 'self'; connect-src 'self'; " +
		"frame-ancestors 'none'; base-uri 'none'; form-action 'self'"
	immutable = "public, max-age=31536000, immutable"
)

// Asset is one served file.
type Asset struct {
	Name        string // the hashed name served under /assets/
	ContentType string
	Body        []byte
	ETag        string
}

// Console is the loaded, hashed set of assets. The zero value is not usable: use
// Load or Default.
type Console struct {
	index  Asset
	assets map[string]Asset // by hashed name
	names  map[string]string
}

// refRe finds the references an asset makes to another: `"./name.ext"` in a module
// (imports) and `"assets/name.ext"` in index.html.
var refRe = regexp.MustCompile(`"(\./|assets/)([a-z][a-z0-9-]*\.(?:js|css|svg))"`)

// Load reads the assets from fsys (a folder holding index.html and the modules),
// rewrites references to hashed names and hashes every file. It fails on a
// reference to a missing file or an import cycle.
func Load(fsys fs.FS) (*Console, error) {
	raw := map[string][]byte{}
	err := fs.WalkDir(fsys, ".", func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := fs.ReadFile(fsys, p)
		if err != nil {
			return err
		}
		raw[p] = b
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("read console assets: %w", err)
	}
	if _, ok := raw["index.html"]; !ok {
		return nil, fmt.Errorf("console assets: no index.html")
	}
	c := &Console{assets: map[string]Asset{}, names: map[string]string{}}
	visiting := map[string]bool{}
	var resolve func(name string) (string, error)
	resolve = func(name string) (string, error) {
		if h, ok := c.names[name]; ok {
			return h, nil
		}
		b, ok := raw[name]
		if !ok {
			return "", fmt.Errorf("console assets: no file %s", name)
		}
		if visiting[name] {
			return "", fmt.Errorf("console assets: import cycle through %s", name)
		}
		visiting[name] = true
		out, err := rewrite(b, resolve)
		if err != nil {
			return "", err
		}
		sum := sha256.Sum256(out)
		ext := path.Ext(name)
		hashed := strings.TrimSuffix(name, ext) + "." + hex.EncodeToString(sum[:6]) + ext
		c.names[name] = hashed
		c.assets[hashed] = Asset{Name: hashed, ContentType: contentType(name), Body: out,
			ETag: `"` + hex.EncodeToString(sum[:16]) + `"`}
		return hashed, nil
	}
	names := make([]string, 0, len(raw))
	for n := range raw {
		names = append(names, n)
	}
	sort.Strings(names)
	for _, n := range names {
		if n == "index.html" {
			continue
		}
		if _, err := resolve(n); err != nil {
			return nil, err
		}
	}
	idx, err := rewrite(raw["index.html"], resolve)
	if err != nil {
		return nil, err
	}
	sum := sha256.Sum256(idx)
	c.index = Asset{Name: "index.html", ContentType: "text/html; charset=utf-8", Body: idx,
		ETag: `"` + hex.EncodeToString(sum[:16]) + `"`}
	return c, nil
}

// rewrite replaces every reference in b by the hashed name resolve gives.
func rewrite(b []byte, resolve func(string) (string, error)) ([]byte, error) {
	var err error
	out := refRe.ReplaceAllFunc(b, func(m []byte) []byte {
		sub := refRe.FindSubmatch(m)
		h, rerr := resolve(string(sub[2]))
		if rerr != nil && err == nil {
			err = rerr
		}
		return []byte(`"` + string(sub[1]) + h + `"`)
	})
	return out, err
}

func contentType(name string) string {
	switch path.Ext(name) {
	case ".js":
		return "text/javascript; charset=utf-8"
	case ".css":
		return "text/css; charset=utf-8"
	}
	if t := mime.TypeByExtension(path.Ext(name)); t != "" {
		return t
	}
	return "application/octet-stream"
}

var loadDefault = sync.OnceValues(func() (*Console, error) {
	sub, err := fs.Sub(embedded, "assets")
	if err != nil {
		return nil, err
	}
	return Load(sub)
})

// Default returns the console of the embedded assets, loaded once. It panics if
// they do not load, which the package's tests rule out.
func Default() *Console {
	c, err := loadDefault()
	if err != nil {
		panic(err)
	}
	return c
}

// Hashed returns the served name of an asset ("app.js" → "app.<hash>.js").
func (c *Console) Hashed(name string) (string, bool) {
	h, ok := c.names[name]
	return h, ok
}

// SetHeaders sets the security headers every console response carries.
func SetHeaders(h http.Header) {
	h.Set("Content-Security-Policy", CSP)
	h.Set("X-Frame-Options", "DENY")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cross-Origin-Opener-Policy", "same-origin")
}

// ServeIndex writes the page (no-cache: revalidated with its ETag on every load,
// so a new deployment's asset names are picked up at once).
func (c *Console) ServeIndex(w http.ResponseWriter, r *http.Request) {
	c.serve(w, r, c.index, "no-cache")
}

// ServeAsset writes the asset with hashed name; false when there is none (the
// caller answers 404).
func (c *Console) ServeAsset(w http.ResponseWriter, r *http.Request, name string) bool {
	a, ok := c.assets[name]
	if !ok {
		return false
	}
	c.serve(w, r, a, immutable)
	return true
}

func (c *Console) serve(w http.ResponseWriter, r *http.Request, a Asset, cache string) {
	h := w.Header()
	SetHeaders(h)
	h.Set("Cache-Control", cache)
	h.Set("ETag", a.ETag)
	h.Set("Content-Type", a.ContentType)
	if inm := r.Header.Get("If-None-Match"); inm != "" && strings.Contains(inm, a.ETag) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(a.Body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		_, _ = w.Write(a.Body)
	}
}
