package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/chromedp/chromedp/kb"
	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/localbackend"
)

// chromium is Debian's chromium, installed by `make browser` (and .ci/run).
const chromium = "/usr/bin/chromium"

// browser starts headless Chromium with a fresh profile and every background
// connection off (the test machine's network is closed). It skips when chromium
// is missing, and fails instead under CI=true.
func browser(t *testing.T) context.Context {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s is missing (CI=true): run `make browser` first", chromium)
		}
		t.Skipf("%s is missing: `make browser` installs it", chromium)
	}
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.WindowSize(1280, 800),
		chromedp.Flag("headless", true),
		chromedp.Flag("no-sandbox", true),
		chromedp.Flag("disable-gpu", true),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("no-first-run", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancelTab := chromedp.NewContext(actx)
	ctx, cancelTime := context.WithTimeout(ctx, 90*time.Second)
	t.Cleanup(func() { cancelTime(); cancelTab(); cancelAlloc() })
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start chromium: %v", err)
	}
	return ctx
}

// serve runs the real `molt serve` wiring (local backend, offline model, the
// workers and the tick) on a free port and returns its base URL and admin token.
func serve(t *testing.T) (string, string, *app.App) {
	t.Helper()
	t.Setenv("MOLT_MODEL", "offline")
	cfg := app.Config{Backend: app.BackendLocal, DataDir: t.TempDir()}
	a, err := localbackend.NewApp(cfg, slog.New(slog.NewJSONHandler(io.Discard, nil)))
	if err != nil {
		t.Fatalf("new app: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	ready := make(chan string, 1)
	done := make(chan error, 1)
	token := "molt_" + strings.Repeat("b", 43)
	go func() {
		done <- a.Serve(ctx, app.ServeOptions{Addr: "127.0.0.1:0", AdminToken: token, Tick: time.Second,
			Ready: func(addr string) { ready <- addr }})
	}()
	t.Cleanup(func() {
		cancel()
		<-done
		_ = a.Close()
	})
	select {
	case addr := <-ready:
		return "http://" + addr, token, a
	case err := <-done:
		t.Fatalf("serve: %v", err)
	case <-time.After(20 * time.Second):
		t.Fatal("serve did not start")
	}
	return "", "", nil
}

// apiCall makes one API call outside the browser (a concurrent editor).
func apiCall(t *testing.T, base, token, method, path, body string, headers ...string) *http.Response {
	t.Helper()
	req, err := http.NewRequest(method, base+path, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+token)
	if strings.HasPrefix(body, "{") {
		req.Header.Set("Content-Type", "application/json")
	}
	for i := 0; i+1 < len(headers); i += 2 {
		req.Header.Set(headers[i], headers[i+1])
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", method, path, err)
	}
	t.Cleanup(func() { resp.Body.Close() })
	if resp.StatusCode >= 300 {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("%s %s: %d %s", method, path, resp.StatusCode, b)
	}
	return resp
}

// TestConsoleInBrowser drives the console in headless Chromium against molt
// serve: sign in, create a workspace, chat and see the offline reply arrive live,
// /evo, see the run appear in the Evolution tab and approve it, see the apply
// land, roll it back through a conflict by forcing it, edit a file while someone
// else changed it and see the 412, see a settings error beside its field, reach
// the Tokens tab by keyboard, create a token (its secret shown once), revoke it
// and see it refused, page a long list and unfold a long text; a readonly token
// sees no write buttons. Screenshots of each view, at 1280×800 and 390×844, go
// to the test's artifact directory.
func TestConsoleInBrowser(t *testing.T) {
	ctx := browser(t)
	base, token, a := serve(t)
	shots := t.ArtifactDir()
	// L1: a run waits for a reviewer instead of applying itself.
	apiCall(t, base, token, "PUT", "/api/settings", `{"evolution":{"level":"L1"}}`)

	t.Logf("screenshots in %s", shots)

	// shot writes the page as it is at 1280×800 and on a 390×844 phone
	// (name-1280x800.png, name-390x844.png), and leaves the viewport at 1280×800.
	shot := func(name string) chromedp.Action[chromedp.Void] {
		return func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			for _, size := range []struct {
				w, h int64
				opts []chromedp.EmulateViewportOption
			}{{1280, 800, nil}, {390, 844, []chromedp.EmulateViewportOption{chromedp.EmulateMobile}}} {
				if _, err := chromedp.EmulateViewport(size.w, size.h, size.opts...)(ctx, tg); err != nil {
					return chromedp.Void{}, err
				}
				// Two frames, so the layout of the new width is painted.
				if _, err := chromedp.Evaluate[bool](`new Promise((r) => requestAnimationFrame(() => requestAnimationFrame(() => r(true))))`,
					chromedp.EvalAwaitPromise)(ctx, tg); err != nil {
					return chromedp.Void{}, err
				}
				png, err := chromedp.FullScreenshot(100)(ctx, tg)
				if err != nil {
					return chromedp.Void{}, err
				}
				if err := os.WriteFile(filepath.Join(shots, fmt.Sprintf("%s-%dx%d.png", name, size.w, size.h)), png, 0o644); err != nil {
					return chromedp.Void{}, err
				}
			}
			return chromedp.EmulateViewport(1280, 800)(ctx, tg)
		}
	}
	step := func(what string, actions ...chromedp.Action[chromedp.Void]) {
		t.Helper()
		sctx, cancel := context.WithTimeout(ctx, 15*time.Second)
		defer cancel()
		start := time.Now()
		defer func() { t.Logf("%s: %v", what, time.Since(start).Round(time.Millisecond)) }()
		var err error
		for _, a := range actions {
			// A live update may re-render the page between finding a node
			// and acting on it: the action did not happen, so it is tried
			// again on the new node (each action alone, never the step).
			for try := 0; ; try++ {
				err = chromedp.Do(sctx, a)
				if err == nil || try == 4 || !strings.Contains(err.Error(), "Could not find node with given id") {
					break
				}
				time.Sleep(50 * time.Millisecond)
			}
			if err != nil {
				break
			}
		}
		if err != nil {
			loc, _ := chromedp.Run(ctx, chromedp.Location())
			body, _ := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("main")))
			t.Fatalf("%s: %v\nat %s, page:\n%s", what, err, loc, body)
		}
	}
	eval := func(expr string) map[string]any {
		t.Helper()
		v, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](expr))
		if err != nil {
			t.Fatalf("evaluate %s: %v", expr, err)
		}
		return v
	}
	// labelled checks that every control of the view has a name a screen reader
	// reads: a <label for>, aria-label or, for a button, its text.
	labelled := func(view string) {
		t.Helper()
		got := eval(`({bare: [...document.querySelectorAll("main input, main select, main textarea, main button")]
			.filter((e) => !(e.labels && e.labels.length) && !e.getAttribute("aria-label") && !e.textContent.trim())
			.map((e) => e.outerHTML.slice(0, 120))})`)
		if bare, _ := got["bare"].([]any); len(bare) > 0 {
			t.Errorf("%s: controls without a label: %v", view, bare)
		}
	}

	step("sign in",
		chromedp.Navigate(base+"/"),
		chromedp.WaitVisible(chromedp.ID("token")),
		chromedp.SendKeys(chromedp.ID("token"), token),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.ID("tabs")),
	)
	headers := eval(`({stored: sessionStorage.getItem("molt.token") !== null, cookie: document.cookie, url: location.href})`)
	if headers["stored"] != true || headers["cookie"] != "" || strings.Contains(fmt.Sprint(headers["url"]), token) {
		t.Fatalf("token storage: %v; want it in sessionStorage only", headers)
	}

	step("create a workspace and a session",
		chromedp.WaitVisible(chromedp.ID("new-ws")),
		chromedp.SendKeys(chromedp.ID("new-ws"), "acme"),
		chromedp.Click(chromedp.ID("create-ws")),
		chromedp.WaitVisible(chromedp.ID("new-session")),
		chromedp.Click(chromedp.ID("new-session")),
		chromedp.WaitVisible(chromedp.ID("chat-input")),
	)
	step("chat: the offline reply appears live",
		chromedp.SendKeys(chromedp.ID("chat-input"), "hello there"),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.Search(`//li[contains(@class,"role-assistant")][contains(., "[offline model]")]`)),
		shot("chat"),
	)
	labelled("chat")

	step("/evo queues a run",
		chromedp.SendKeys(chromedp.ID("chat-input"), "/evo always answer in French"),
		chromedp.Click(chromedp.ID("send")),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="turn-state"]//a`)),
	)
	step("the run appears in the Evolution tab awaiting review",
		chromedp.Click(chromedp.CSS(`a[data-tab="evolution"]`)),
		chromedp.WaitVisible(chromedp.Search(`//tr[@data-run]//span[contains(@class,"badge")][.="awaiting_review"]`)),
		shot("evolution-runs"),
	)
	labelled("evolution runs")
	step("the run's review",
		chromedp.Click(chromedp.CSS(`tr[data-run] a`)),
		chromedp.WaitVisible(chromedp.Search(`//h2//span[contains(@class,"badge")][.="awaiting_review"]`)),
		chromedp.WaitVisible(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.CSS("#patch table.diff")),
		chromedp.WaitVisible(chromedp.ID("verdict")),
		shot("evolution-run"),
	)
	labelled("evolution run")
	step("approve; the apply lands",
		chromedp.SendKeys(chromedp.ID("review-hint"), "looks right"),
		chromedp.Click(chromedp.ID("approve")),
		chromedp.WaitVisible(chromedp.Search(`//h2//span[contains(@class,"badge")][.="applied"]`)),
		chromedp.WaitNotPresent(chromedp.ID("approve")),
		chromedp.Click(chromedp.Search(`//h3[.="Applies"]/following-sibling::ul//a`)),
		chromedp.WaitVisible(chromedp.ID("manifest")),
		chromedp.WaitVisible(chromedp.ID("rollback")),
		shot("apply"),
	)

	// Someone edits a file the apply published: the rollback is refused with
	// the conflict list, and forcing it restores the snapshot.
	apiCall(t, base, token, "PUT", "/api/workspaces/acme/files/INSTRUCTIONS.md", "edited after the apply\n")
	step("a rollback conflict, then forced",
		chromedp.Click(chromedp.ID("rollback")),
		chromedp.WaitVisible(chromedp.Search(`//ul[@id="conflicts"]/li[contains(., "INSTRUCTIONS.md")]`)),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="apply-error"]//div[contains(@class,"problem")][contains(., "409")][contains(., "conflict")]`)),
		shot("rollback-conflict"),
		chromedp.Click(chromedp.ID("force-rollback")),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="rollback-result"][contains(., "Rolled back")]`)),
		chromedp.WaitVisible(chromedp.Search(`//h2//span[contains(@class,"badge")][.="rolled_back"]`)),
		chromedp.WaitNotPresent(chromedp.ID("rollback")),
	)

	// A file, opened in the console, then changed by someone else.
	apiCall(t, base, token, "PUT", "/api/workspaces/acme/files/USER.md", "first version\n")
	step("open the file",
		chromedp.Navigate(base+"/#/files/acme/USER.md"),
		chromedp.WaitVisible(chromedp.ID("file-content")),
		chromedp.WaitVisible(chromedp.ID("save-file")),
	)
	apiCall(t, base, token, "PUT", "/api/workspaces/acme/files/USER.md", "someone else's version\n")
	step("a conflicting save is refused with 412",
		chromedp.SendKeys(chromedp.ID("file-content"), "my edit "),
		chromedp.Click(chromedp.ID("save-file")),
		chromedp.WaitVisible(chromedp.Search(`//div[@id="file-error"]//div[contains(@class,"problem")][contains(., "412")][contains(., "precondition_failed")]`)),
		shot("file-conflict"),
	)
	labelled("file")
	resp := apiCall(t, base, token, "GET", "/api/workspaces/acme/files/USER.md", "")
	if b, _ := io.ReadAll(resp.Body); string(b) != "someone else's version\n" {
		t.Fatalf("USER.md after the refused save = %q, want the other editor's version", b)
	}

	step("settings: a validation error beside its field",
		chromedp.Click(chromedp.CSS(`a[data-tab="settings"]`)),
		chromedp.WaitVisible(chromedp.ID("set-evolution-max_attempts")),
		chromedp.SetValue(chromedp.ID("set-evolution-max_attempts"), "0"),
		chromedp.Click(chromedp.ID("save-settings")),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="set-evolution-max_attempts-error"][string-length(.) > 0]`)),
		shot("settings-error"),
	)
	labelled("settings")

	// Keyboard only: from the top of the page, Tab to the Tokens tab and open it
	// with Enter.
	step("keyboard: Tab to the Tokens tab, Enter opens it",
		chromedp.Evaluate[chromedp.Void](`document.activeElement && document.activeElement.blur()`),
		func(ctx context.Context, tg *chromedp.Target) (chromedp.Void, error) {
			for range 12 {
				if _, err := chromedp.KeyEvent(kb.Tab)(ctx, tg); err != nil {
					return chromedp.Void{}, err
				}
				on, err := chromedp.Evaluate[bool](`document.activeElement.matches('a[data-tab="tokens"]')`)(ctx, tg)
				if err != nil || on {
					return chromedp.Void{}, err
				}
			}
			return chromedp.Void{}, fmt.Errorf("12 Tabs did not reach the Tokens tab")
		},
		chromedp.KeyEvent(kb.Enter),
		chromedp.WaitVisible(chromedp.ID("tokens-table")),
		chromedp.WaitVisible(chromedp.Search(`//a[@data-tab="tokens"][@aria-current="page"]`)),
	)

	// A token created in the console: its secret is shown once, works, and is
	// refused once the token is revoked.
	step("create a token; its secret is shown once",
		chromedp.SetValue(chromedp.ID("tok-level"), "workspace"),
		chromedp.SendKeys(chromedp.ID("tok-ws"), "acme"),
		chromedp.SendKeys(chromedp.ID("tok-name"), "ci bot"),
		chromedp.SendKeys(chromedp.ID("tok-name"), kb.Enter), // Enter submits the form
		chromedp.WaitVisible(chromedp.ID("new-token-secret")),
		shot("tokens-created"),
	)
	labelled("tokens")
	created := eval(`({secret: document.getElementById("new-token-secret").value, id: document.getElementById("new-token-secret").dataset.token})`)
	secret, tokID := fmt.Sprint(created["secret"]), fmt.Sprint(created["id"])
	if !strings.HasPrefix(secret, "molt_") || tokID == "" {
		t.Fatalf("created token shown as %v, want its id and a molt_ secret", created)
	}
	bearer := func(tok string) int {
		t.Helper()
		req, _ := http.NewRequest("GET", base+"/api/me", nil)
		req.Header.Set("Authorization", "Bearer "+tok)
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		return resp.StatusCode
	}
	if got := bearer(secret); got != http.StatusOK {
		t.Fatalf("GET /api/me with the new token: %d, want 200", got)
	}
	row := fmt.Sprintf(`//tr[@data-token=%q]`, tokID)
	step("the token is listed, its secret no longer shown",
		chromedp.Click(chromedp.CSS(`a[data-tab="chat"]`)),
		chromedp.WaitVisible(chromedp.CSS(".ws-link")),
		chromedp.Click(chromedp.CSS(`a[data-tab="tokens"]`)),
		chromedp.WaitVisible(chromedp.Search(row+`[td[2]="workspace"][td[3]="acme"][td[4]="ci bot"][td[6]!="never"]`)),
		shot("tokens"),
	)
	page := eval(`({text: document.body.innerText, html: document.documentElement.outerHTML,
		values: [...document.querySelectorAll("input, textarea")].map((e) => e.value).join(" "), secretBox: !!document.getElementById("new-token-secret")})`)
	for _, k := range []string{"text", "html", "values"} {
		if strings.Contains(fmt.Sprint(page[k]), secret) {
			t.Errorf("the tokens view shows the secret again (in its %s)", k)
		}
	}
	if page["secretBox"] != false {
		t.Errorf("the one-time secret display is still there after leaving the view")
	}
	step("revoke the token, after a confirmation",
		chromedp.Click(chromedp.Search(row+`//button[contains(@class,"revoke")]`)),
		chromedp.WaitVisible(chromedp.ID("confirm-revoke")),
		chromedp.Click(chromedp.ID("confirm-revoke")),
		chromedp.WaitVisible(chromedp.Search(row+`//span[contains(@class,"badge")][contains(., "revoked")]`)),
		chromedp.WaitNotPresent(chromedp.Search(row+`//button`)),
	)
	if got := bearer(secret); got != http.StatusUnauthorized {
		t.Fatalf("GET /api/me with the revoked token: %d, want 401", got)
	}

	// Long lists are paged: 31 workspaces show 20, then a button for the next page.
	for i := range 30 {
		apiCall(t, base, token, "PUT", fmt.Sprintf("/api/workspaces/ws-%02d", i), "")
	}
	step("a long list is paged",
		chromedp.Click(chromedp.CSS(`a[data-tab="chat"]`)),
		chromedp.WaitVisible(chromedp.Search(`//button[contains(@class,"more")][contains(., "more workspaces")]`)),
	)
	if n := eval(`({n: document.querySelectorAll(".ws-link").length})`)["n"]; n != float64(20) {
		t.Errorf("31 workspaces: %v listed, want the first page of 20", n)
	}
	step("the next page of the list",
		chromedp.WaitVisible(chromedp.Search(`//button[contains(@class,"more")][contains(., "(11 left)")]`)),
		chromedp.Click(chromedp.Search(`//button[contains(@class,"more")][contains(., "more workspaces")]`)),
		chromedp.WaitNotPresent(chromedp.CSS(`button.more`)),
	)
	if n := eval(`({n: document.querySelectorAll(".ws-link").length})`)["n"]; n != float64(31) {
		t.Errorf("31 workspaces: %v listed after the next page, want 31", n)
	}

	step("a phone-sized screen",
		chromedp.EmulateViewport(390, 844, chromedp.EmulateMobile),
		chromedp.Click(chromedp.CSS(`a[data-tab="chat"]`)),
		chromedp.WaitVisible(chromedp.CSS(".ws-link")),
		shot("phone-chat"),
		chromedp.EmulateViewport(1280, 800),
	)
	// A long message is folded: its first lines, the rest behind a disclosure.
	var sessions struct {
		Items []struct {
			ID string `json:"id"`
		} `json:"items"`
	}
	if err := json.NewDecoder(apiCall(t, base, token, "GET", "/api/workspaces/acme/sessions", "").Body).Decode(&sessions); err != nil || len(sessions.Items) == 0 {
		t.Fatalf("sessions of acme: %v %v", sessions, err)
	}
	var long strings.Builder
	for i := range 40 {
		fmt.Fprintf(&long, "line %d of a long message\n", i+1)
	}
	body, _ := json.Marshal(map[string]string{"text": long.String()})
	apiCall(t, base, token, "POST", "/api/sessions/"+sessions.Items[0].ID+"/messages", string(body))
	step("a long text is folded",
		chromedp.Navigate(base+"/#/chat/acme/"+sessions.Items[0].ID),
		chromedp.WaitVisible(chromedp.Search(`//li[contains(@class,"role-user")][contains(., "line 20 of")]//summary[contains(., "more lines")]`)),
	)
	folded := eval(`(() => { const li = [...document.querySelectorAll("li.role-user")].at(-1);
		return {shown: li.innerText.includes("line 20 of"), hidden: !li.innerText.includes("line 40 of")}; })()`)
	if folded["shown"] != true || folded["hidden"] != true {
		t.Errorf("a 40-line message: %v, want its first lines shown and the rest folded", folded)
	}
	step("unfold the long text",
		chromedp.Click(chromedp.Search(`//li[contains(@class,"role-user")]//summary[contains(., "more lines")]`)),
		chromedp.WaitVisible(chromedp.Search(`//li[contains(@class,"role-user")]//pre[contains(., "line 40 of")]`)),
		shot("chat-long"),
	)

	step("sign out forgets the token",
		chromedp.Click(chromedp.ID("signout")),
		chromedp.WaitVisible(chromedp.ID("token")),
	)
	if got := eval(`({token: sessionStorage.getItem("molt.token")})`); got["token"] != nil {
		t.Fatalf("after sign-out sessionStorage holds %v, want nothing", got["token"])
	}

	// A readonly token of acme reads the chat and the files but is offered no
	// write: no composer, no new session, no save, no Evolution, Settings or Tokens tab.
	ro, _, err := a.CreateToken(context.Background(), auth.Readonly, "acme", "reader")
	if err != nil {
		t.Fatal(err)
	}
	step("a readonly token sees no write buttons",
		chromedp.SendKeys(chromedp.ID("token"), ro),
		chromedp.Click(chromedp.ID("signin-submit")),
		chromedp.WaitVisible(chromedp.Search(`//span[@id="whoami"][contains(., "readonly")]`)),
		chromedp.WaitVisible(chromedp.CSS(`.sessions a`)),
		chromedp.Click(chromedp.CSS(`.sessions a`)),
		chromedp.WaitVisible(chromedp.Search(`//li[contains(@class,"role-assistant")]`)),
		shot("readonly-chat"),
	)
	got := eval(`({composer: !!document.getElementById("chat-input"), newSession: !!document.getElementById("new-session"),
		newWS: !!document.getElementById("new-ws"),
		evoTab: !document.querySelector('a[data-tab="evolution"]').hidden, settingsTab: !document.querySelector('a[data-tab="settings"]').hidden,
		tokensTab: !document.querySelector('a[data-tab="tokens"]').hidden})`)
	for k, v := range got {
		if v != false {
			t.Errorf("readonly token: %s offered (%v)", k, v)
		}
	}
	step("readonly: no tokens view",
		chromedp.Navigate(base+"/#/tokens"),
		chromedp.WaitVisible(chromedp.Search(`//main//p[contains(., "full token")]`)),
	)
	if got := eval(`({table: !!document.getElementById("tokens-table"), create: !!document.getElementById("create-token")})`); got["table"] != false || got["create"] != false {
		t.Errorf("readonly token on #/tokens: %v, want no list and no create form", got)
	}
	step("readonly: a file without a save button",
		chromedp.Navigate(base+"/#/files/acme/USER.md"),
		chromedp.WaitVisible(chromedp.ID("file-content")),
	)
	if got := eval(`({save: !!document.getElementById("save-file"), editable: !document.getElementById("file-content").readOnly})`); got["save"] != false || got["editable"] != false {
		t.Errorf("readonly token on a file: %v, want no save button and a read-only text", got)
	}
}
