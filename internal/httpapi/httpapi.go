package httpapi

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"github.com/molt-dev/molt/internal/a2a"
	"log/slog"
	"net/http"
	"net/url"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/aws/aws-lambda-go/lambdacontext"
	"github.com/molt-dev/molt/internal/applies"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/buildinfo"
	"github.com/molt-dev/molt/internal/changes"
	"github.com/molt-dev/molt/internal/chat"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/naming"
	"github.com/molt-dev/molt/internal/obs"
	"github.com/molt-dev/molt/internal/runs"
	"github.com/molt-dev/molt/internal/search"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/supervisor"
	"github.com/molt-dev/molt/internal/workspace"
)

// DefaultMaxBody is the default limit of a JSON request body.
const DefaultMaxBody = 1 << 20

// DefaultRequestTimeout is the server-side deadline of a request when
// Config.RequestTimeout is zero: under API Gateway's 30 s integration timeout, so
// the client gets molt's 503 rather than the gateway's 504.
const DefaultRequestTimeout = 25 * time.Second

// Check is one dependency GET /health?deep=1 probes: Run returns nil when the
// dependency answers.
type Check struct {
	Name string // "store", "queue"
	Run  func(ctx context.Context) error
}

// Config wires the handler. Store is required; every other field has a default.
type Config struct {
	Store        store.Store
	Clock        molt.Clock   // default molt.SystemClock
	Logger       *slog.Logger // default obs.NewLogger(os.Stderr)
	Version, SHA string       // for /health; default buildinfo.Version, buildinfo.SHA
	// MaxBody limits JSON request bodies (default DefaultMaxBody). File bodies are
	// limited by workspace.MaxFileSize.
	MaxBody int64
	// Chat is the agent runtime behind the session and message routes; nil leaves
	// those routes out.
	Chat *chat.Service
	// Runs is the evolution run pipeline behind /api/evolution/runs; nil leaves
	// those routes out.
	Runs *runs.Service
	// Applies runs evolution applies behind /api/evolution/applies; nil leaves
	// those routes out.
	Applies *applies.Service
	// Delegate is the delegation registry behind /api/workspaces/{ws}/remotes
	// and /resolve; nil leaves those routes out.
	Delegate *delegate.Service
	// A2A serves the A2A agents (/a2a/{ws}/{agent}, its card, the root card);
	// nil leaves those routes out. Its routes answer JSON-RPC, not problems,
	// and authenticate themselves: they are not in Routes.
	A2A *a2a.Handler
	// Naming is background chat naming behind POST /api/sessions/{id}/name and
	// the naming state of GET /api/sessions/{id}; nil leaves them out.
	Naming *naming.Service
	// Supervisor manages campaigns behind /api/campaigns; nil leaves those
	// routes out.
	Supervisor *supervisor.Service
	// RequestTimeout is every request's deadline (default DefaultRequestTimeout):
	// a store that hangs makes the request answer 503 when it passes.
	RequestTimeout time.Duration
	// Tokens creates, lists and revokes tokens behind /api/tokens; nil leaves
	// those routes out.
	Tokens *auth.Tokens
	// Checks are what GET /health?deep=1 probes besides the store (which it
	// always reads); nil probes the store only.
	Checks []Check
	// Search is the web search chain behind /api/search; nil leaves it out.
	Search *search.Client
	// A2AOnly serves /health and the A2A routes and nothing else: the
	// streaming function URL, whose policy grants only what A2A needs.
	A2AOnly bool
}

type server struct {
	store      store.Store
	clock      molt.Clock
	log        *slog.Logger
	version    string
	sha        string
	maxBody    int64
	chat       *chat.Service
	runs       *runs.Service
	applies    *applies.Service
	a2a        *a2a.Handler
	a2aOnly    bool
	settings   *settings.Service
	wsSettings *settings.WorkspaceService
	workspaces *workspace.Service
	delegate   *delegate.Service
	naming     *naming.Service
	supervisor *supervisor.Service
	tokens     *auth.Tokens
	timeout    time.Duration
	checks     []Check
	search     *search.Client
	changes    *changes.Service
	mux        *http.ServeMux
	patterns   []string // every registered pattern, for Routes
}

// New returns the UI API handler. It panics when c.Store is nil.
func New(c Config) http.Handler {
	if c.Store == nil {
		panic("httpapi: Config.Store is nil")
	}
	s := &server{store: c.Store, clock: c.Clock, log: c.Logger, version: c.Version, sha: c.SHA, maxBody: c.MaxBody, chat: c.Chat, runs: c.Runs, applies: c.Applies,
		delegate: c.Delegate, a2a: c.A2A, naming: c.Naming, supervisor: c.Supervisor,
		tokens: c.Tokens, timeout: c.RequestTimeout, checks: c.Checks, search: c.Search,
		a2aOnly: c.A2AOnly}
	s.settings = &settings.Service{Store: c.Store}
	s.wsSettings = &settings.WorkspaceService{Store: c.Store}
	s.workspaces = &workspace.Service{Store: c.Store, Surfaces: &workspace.Surfaces{Store: c.Store},
		Now: func() time.Time { return s.clock.Now() }}
	if s.timeout <= 0 {
		s.timeout = DefaultRequestTimeout
	}
	if s.clock == nil {
		s.clock = molt.SystemClock{}
	}
	s.changes = &changes.Service{Store: c.Store, Clock: s.clock}
	if s.log == nil {
		s.log = obs.NewLogger(os.Stderr)
	}
	if _, ok := s.log.Handler().(obs.Handler); !ok {
		// Context attributes (the request id) must reach every record.
		s.log = slog.New(obs.Handler{Handler: s.log.Handler()})
	}
	if s.version == "" {
		s.version = buildinfo.Version
	}
	if s.sha == "" {
		s.sha = buildinfo.SHA
	}
	if s.maxBody <= 0 {
		s.maxBody = DefaultMaxBody
	}
	s.mux = http.NewServeMux()
	s.routes()
	return s
}

// Routes returns the patterns ("METHOD /path/{param}") h serves, in the order
// they were registered; nil when h was not built by New. Tests walk them so that
// a route added without an access rule cannot go unnoticed.
func Routes(h http.Handler) []string {
	s, ok := h.(*server)
	if !ok {
		return nil
	}
	return append([]string(nil), s.patterns...)
}

// route registers a pattern on the mux and remembers it for Routes.
func (s *server) route(pattern string, h http.HandlerFunc) {
	s.patterns = append(s.patterns, pattern)
	s.mux.HandleFunc(pattern, h)
}

func (s *server) routes() {
	s.route("GET /health", s.open(s.health))
	if s.a2aOnly {
		s.a2aRoutes()
		return
	}
	s.consoleRoutes()

	s.handle("GET /api/workspaces", s.listWorkspaces)
	s.handle("PUT /api/workspaces/{ws}", s.putWorkspace)
	s.handle("GET /api/workspaces/{ws}", s.getWorkspace)
	s.handle("DELETE /api/workspaces/{ws}", s.deleteWorkspace)

	s.handle("GET /api/workspaces/{ws}/files", s.listFiles)
	s.handle("GET /api/workspaces/{ws}/files/{path...}", s.getFile)
	s.handle("PUT /api/workspaces/{ws}/files/{path...}", s.putFile)
	s.handle("DELETE /api/workspaces/{ws}/files/{path...}", s.deleteFile)

	s.handle("GET /api/settings", s.getSettings)
	s.handle("PUT /api/settings", s.putSettings)
	s.handle("GET /api/workspaces/{ws}/settings", s.getWorkspaceSettings)
	s.handle("PUT /api/workspaces/{ws}/settings", s.putWorkspaceSettings)

	if s.chat != nil {
		s.sessionRoutes()
	}
	if s.runs != nil {
		s.runRoutes()
	}
	if s.applies != nil {
		s.applyRoutes()
	}
	if s.delegate != nil {
		s.remoteRoutes()
	}
	s.a2aRoutes()
	if s.tokens != nil {
		s.handle("GET /api/tokens", s.listTokens)
		s.handle("POST /api/tokens", s.createToken)
		s.handle("DELETE /api/tokens/{id}", s.revokeToken)
	}
	if s.search != nil {
		s.searchRoutes()
	}
	if s.supervisor != nil {
		s.campaignRoutes()
	}
}

// a2aRoutes registers the A2A routes: they answer JSON-RPC, not problems, and
// authenticate themselves, so they are not in Routes.
func (s *server) a2aRoutes() {
	if s.a2a != nil {
		s.a2a.Routes(func(pattern string, fn http.HandlerFunc) {
			s.mux.HandleFunc(pattern, s.open(func(w http.ResponseWriter, r *http.Request) error {
				fn(w, r)
				return nil
			}))
		})
	}
}

// authedFunc is a route handler behind authentication. A returned error is sent
// as a problem; the handler must not have written anything then.
type authedFunc func(w http.ResponseWriter, r *http.Request, c auth.Caller) error

// handle registers an authenticated route.
func (s *server) handle(pattern string, fn authedFunc) {
	s.route(pattern, s.open(func(w http.ResponseWriter, r *http.Request) error {
		c, err := s.authenticate(r)
		if err != nil {
			return err
		}
		return fn(w, r, c)
	}))
}

// open adapts an error-returning handler and marks the request as routed.
func (s *server) open(fn func(w http.ResponseWriter, r *http.Request) error) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if rec, ok := w.(*recorder); ok {
			rec.routed = true
			rec.route = r.Pattern
		}
		if err := fn(w, r); err != nil {
			s.writeError(w, r, err)
		}
	}
}

// authenticate resolves the bearer token. Neither the secret nor its hash is
// ever logged or returned.
func (s *server) authenticate(r *http.Request) (auth.Caller, error) {
	h := r.Header.Get("Authorization")
	if h == "" {
		return auth.Caller{}, &molt.Error{Code: molt.EUNAUTHORIZED, Message: "missing bearer token"}
	}
	secret := auth.ParseBearer(h)
	if !auth.Plausible(secret) {
		// Not the shape of any token molt makes or accepts: refused without a
		// store read, so junk costs nothing and a sick store cannot turn it into
		// a 5xx.
		return auth.Caller{}, &molt.Error{Code: molt.EUNAUTHORIZED, Message: "malformed bearer token"}
	}
	t, err := s.store.TokenByHash(r.Context(), auth.Hash(secret))
	switch {
	case molt.ErrorCode(err) == molt.ENOTFOUND:
		return auth.Caller{}, &molt.Error{Code: molt.EUNAUTHORIZED, Message: "unknown bearer token"}
	case err != nil:
		// The cause is logged: strip anything of the credential an adapter put in it.
		code := molt.ErrorCode(err)
		if code != molt.EUNAVAILABLE {
			code = molt.EINTERNAL
		}
		h := auth.Hash(secret)
		cause := strings.NewReplacer(secret, "[secret]", h, "[hash]", h[:12], "[hash]").Replace(err.Error())
		return auth.Caller{}, &molt.Error{Code: code, Message: "token lookup failed", Err: errors.New("look up token: " + cause)}
	case t.Level.Rank() == 0:
		return auth.Caller{}, &molt.Error{Code: molt.EUNAUTHORIZED, Message: "token has an unknown level"}
	case t.Revoked():
		return auth.Caller{}, &molt.Error{Code: molt.EUNAUTHORIZED, Message: "token was revoked"}
	}
	if now := s.clock.Now(); now.Sub(t.LastUsedAt) >= auth.TouchEvery {
		// Best effort: a failed record of use must not fail the request.
		if err := s.store.TouchToken(r.Context(), t.Hash, now); err != nil {
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "recording token use failed",
				slog.String("token_id", t.ID), slog.String("code", molt.ErrorCode(err)))
		}
	}
	t.Hash = ""
	return auth.Caller{Token: t}, nil
}

// health answers at once from memory; with deep=1 (or true) it also reads the
// store and runs every Check, and answers 503 naming each that failed.
func (s *server) health(w http.ResponseWriter, r *http.Request) error {
	deep := false
	switch r.URL.Query().Get("deep") {
	case "":
	case "1", "true":
		deep = true
	case "0", "false":
	default:
		return molt.Invalid("deep", "deep must be 1 or 0")
	}
	if !deep {
		writeJSON(w, http.StatusOK, map[string]string{"status": "ok", "version": s.version, "sha": s.sha})
		return nil
	}
	checks := append([]Check{{Name: "store", Run: func(ctx context.Context) error {
		_, err := s.store.GetSettings(ctx)
		return err
	}}}, s.checks...)
	type result struct {
		Status string `json:"status"`
		Error  string `json:"error,omitempty"`
	}
	results := make(map[string]result, len(checks))
	var failed []string
	for _, c := range checks {
		if err := c.Run(r.Context()); err != nil {
			s.log.LogAttrs(r.Context(), slog.LevelWarn, "health check failed",
				slog.String("check", c.Name), slog.String("error", err.Error()))
			// The code, never the cause: it may name hosts and tables.
			results[c.Name] = result{Status: "failed", Error: molt.ErrorCode(err)}
			failed = append(failed, c.Name)
			continue
		}
		results[c.Name] = result{Status: "ok"}
	}
	if len(failed) > 0 {
		return &molt.Error{Code: molt.EUNAVAILABLE, Message: "failed: " + strings.Join(failed, ", "),
			Details: map[string]any{"checks": results, "failed": failed}}
	}
	writeJSON(w, http.StatusOK, map[string]any{"status": "ok", "version": s.version, "sha": s.sha, "checks": results})
	return nil
}

// ServeHTTP adds the request id, security headers, the raw path check, problem
// replies for the router's own 404/405/redirects, panic recovery and one access
// log line per request.
func (s *server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	start := time.Now()
	clientID := r.Header.Get("X-Request-Id")
	id := newRequestID(r.Context(), clientID)
	base, cancel := context.WithTimeout(r.Context(), s.timeout)
	defer cancel()
	attrs := []slog.Attr{slog.String("request_id", id)}
	if clientID != "" {
		// Always its own attribute, never mistaken for molt's id; an id that was
		// refused is logged clipped (the JSON log escapes it).
		attrs = append(attrs, slog.String("client_request_id", clip(clientID, maxClientID)))
	}
	ctx := obs.With(context.WithValue(base, reqIDKey{}, id), attrs...)
	r = r.WithContext(ctx)

	h := w.Header()
	h.Set("X-Request-Id", id)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Cache-Control", "no-store")

	rec := &recorder{ResponseWriter: w, req: r}
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			s.log.LogAttrs(ctx, slog.LevelError, "panic serving request", slog.String("panic", fmt.Sprint(v)))
			if !rec.wrote {
				rec.routed = true
				p, _ := problemFor(errors.New("panic"))
				writeProblem(rec, r, p)
			}
		}
		route := rec.route
		if route == "" {
			route = "unmatched"
		}
		s.log.LogAttrs(ctx, slog.LevelInfo, "http request",
			slog.String("method", r.Method),
			slog.String("route", route),
			slog.Int("status", rec.status),
			slog.Int64("duration_ms", time.Since(start).Milliseconds()))
	}()

	if err := checkRawPath(r); err != nil {
		rec.routed = true
		s.writeError(rec, r, err)
		return
	}
	if err := checkQuery(r.URL.RawQuery); err != nil {
		rec.routed = true
		s.writeError(rec, r, err)
		return
	}
	s.mux.ServeHTTP(rec, r)
	if !rec.wrote {
		rec.WriteHeader(http.StatusOK)
	}
}

// checkRawPath refuses a path with ".", ".." or empty inner segments (decoded, so
// %2e%2e and %2F-hidden segments count too) before the router can clean it or
// redirect it somewhere else.
func checkRawPath(r *http.Request) error {
	p := r.URL.Path
	bad := &molt.Error{Code: molt.EINVALID, Reason: reasonInvalidPath, Field: "path",
		Message: "the request path must be clean: no \".\", \"..\" or empty segments"}
	if !strings.HasPrefix(p, "/") {
		return bad
	}
	segs := strings.Split(p[1:], "/")
	for i, seg := range segs {
		switch {
		case seg == "." || seg == "..":
			return bad
		case seg == "" && i != len(segs)-1:
			return bad
		case strings.ContainsAny(seg, "\\\x00"):
			return bad
		}
	}
	return nil
}

// checkQuery refuses a query string that url.ParseQuery would partly drop
// (a bad percent-encoding, a semicolon), so that a malformed parameter is a 400
// naming it rather than silently read as absent, and a parameter given twice
// (handlers read the first; a proxy or a cache may read another).
func checkQuery(raw string) error {
	seen := map[string]bool{}
	for raw != "" {
		var pair string
		pair, raw, _ = strings.Cut(raw, "&")
		if pair == "" {
			continue
		}
		k, v, _ := strings.Cut(pair, "=")
		key, err := url.QueryUnescape(k)
		if err != nil || strings.Contains(k, ";") {
			return molt.Invalid("query", "the query string is malformed: bad parameter name")
		}
		if _, err := url.QueryUnescape(v); err != nil || strings.Contains(v, ";") {
			return molt.Invalid(key, "query parameter %s is malformed (bad percent-encoding or a semicolon)", key)
		}
		if seen[key] {
			return molt.Invalid(key, "query parameter %s is given more than once", key)
		}
		seen[key] = true
	}
	return nil
}

type reqIDKey struct{}

// maxClientID bounds the client request id the log keeps.
const maxClientID = 128

func requestID(ctx context.Context) string {
	id, _ := ctx.Value(reqIDKey{}).(string)
	return id
}

// reqIDRe is the only shape of client request id molt adopts: nothing that
// could be a path, a header or a log-injection trick.
var reqIDRe = regexp.MustCompile(`^[A-Za-z0-9._-]{1,128}$`)

// lambdaIDRe accepts Lambda's own request ids (UUIDs).
var lambdaIDRe = regexp.MustCompile(`^[A-Za-z0-9._:=+/-]{1,128}$`)

// newRequestID returns the caller's X-Request-Id (header) when it has the safe
// shape (reqIDRe), else the Lambda request id, else a random one.
func newRequestID(ctx context.Context, header string) string {
	if reqIDRe.MatchString(header) {
		return header
	}
	if lc, ok := lambdacontext.FromContext(ctx); ok && lambdaIDRe.MatchString(lc.AwsRequestID) {
		return lc.AwsRequestID
	}
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// recorder remembers the status for the access log and replaces the router's own
// replies (404, 405 and trailing-slash redirects, plain text) by problems.
type recorder struct {
	http.ResponseWriter
	req       *http.Request
	status    int
	wrote     bool
	routed    bool   // one of our handlers took the request
	route     string // its pattern
	swallowed bool   // the router's reply was replaced
}

func (w *recorder) WriteHeader(code int) {
	if w.wrote {
		return
	}
	if !w.routed {
		w.swallowed = true
		h := w.Header()
		allow := h.Get("Allow")
		for _, k := range []string{"Location", "Content-Type", "Content-Length", "Allow"} {
			h.Del(k)
		}
		h.Set("X-Content-Type-Options", "nosniff")
		p, _ := problemFor(molt.NotFound("no such route"))
		if code == http.StatusMethodNotAllowed && allow != "" {
			h.Set("Allow", allow)
			p, _ = problemFor(&molt.Error{Code: molt.EINVALID, Reason: reasonMethodNotAllowed,
				Message: "method " + w.req.Method + " is not allowed here; allowed: " + allow})
		}
		w.status, w.wrote = p.Status, true
		writeProblem(w.ResponseWriter, w.req, p)
		return
	}
	w.status = code
	w.wrote = true
	w.ResponseWriter.WriteHeader(code)
}

func (w *recorder) Write(b []byte) (int, error) {
	if w.swallowed {
		return len(b), nil
	}
	if !w.wrote {
		w.WriteHeader(http.StatusOK)
	}
	return w.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (w *recorder) Unwrap() http.ResponseWriter { return w.ResponseWriter }

func writeJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		b = []byte(`{}`)
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}
