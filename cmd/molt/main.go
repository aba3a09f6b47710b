// Command molt runs molt on one machine and helps develop and operate it:
//
//	molt serve [--addr 127.0.0.1:8080] [--data ./.molt] [--tick 10s]
//	molt token create --level full|workspace|readonly [--workspace WS] [--name N] [--data DIR]
//	molt token list [--data DIR]
//	molt token revoke ID [--data DIR]
//	molt token rotate-admin [--data DIR]
//	molt invoke <function> --event FILE [--data DIR]
//	molt bootstrap
//	molt version
//
// The store is chosen by MOLT_BACKEND (local: SQLite under --data; aws: DynamoDB,
// SQS and S3 named by MOLT_TABLE, MOLT_BUCKET and MOLT_QUEUE_<KIND>, on
// AWS_ENDPOINT_URL when set).
package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"path/filepath"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/buildinfo"
	"github.com/molt-dev/molt/internal/delegate"
	"github.com/molt-dev/molt/internal/localbackend"
	"github.com/molt-dev/molt/internal/obs"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	err := run(ctx, os.Args[1:], os.Stdout, os.Stderr)
	stop()
	if err != nil {
		if !errors.Is(err, flag.ErrHelp) {
			fmt.Fprintln(os.Stderr, "molt:", err)
		}
		os.Exit(2)
	}
}

const usage = `usage:
  molt serve [--addr 127.0.0.1:8080] [--data ./.molt] [--tick 10s]
  molt token create --level full|workspace|readonly [--workspace WS] [--name NAME] [--data DIR]
  molt token list [--data DIR]
  molt token revoke ID [--data DIR]
  molt token rotate-admin [--data DIR]
  molt invoke <function> --event FILE [--data DIR]
  molt resolve --workspace WS [--data DIR] 'message'   (how a message would route; nothing is sent)
  molt bootstrap
  molt version`

func run(ctx context.Context, args []string, stdout, stderr io.Writer) error {
	if len(args) == 0 {
		fmt.Fprintln(stderr, usage)
		return flag.ErrHelp
	}
	logger := obs.NewLogger(stderr)
	slog.SetDefault(logger)
	switch args[0] {
	case "serve":
		return serve(ctx, args[1:], stdout, logger)
	case "token":
		return token(ctx, args[1:], stdout, logger)
	case "invoke":
		return invoke(ctx, args[1:], stdout, logger)
	case "resolve":
		return resolve(ctx, args[1:], stdout, logger)
	case "bootstrap":
		cfg := app.ConfigFromEnv(os.Environ())
		return awsbackend.Bootstrap(ctx, cfg, app.Kinds(), stdout)
	case "version":
		fmt.Fprintf(stdout, "molt %s (%s)\n", buildinfo.Version, buildinfo.SHA)
		return nil
	case "-h", "--help", "help":
		fmt.Fprintln(stdout, usage)
		return nil
	}
	fmt.Fprintln(stderr, usage)
	return fmt.Errorf("unknown command %q", args[0])
}

// open builds the app from the environment, with --data overriding MOLT_DATA.
func open(ctx context.Context, data string, logger *slog.Logger) (*app.App, error) {
	cfg := app.ConfigFromEnv(os.Environ())
	if data != "" {
		cfg.DataDir = data
	}
	return openConfig(ctx, cfg, logger)
}

// openConfig builds the app on cfg.
func openConfig(ctx context.Context, cfg app.Config, logger *slog.Logger) (*app.App, error) {
	if cfg.Backend == app.BackendAWS {
		return awsbackend.NewApp(ctx, cfg, logger)
	}
	return localbackend.NewApp(cfg, logger)
}

func serve(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("serve", flag.ContinueOnError)
	addr := fs.String("addr", "127.0.0.1:8080", "API listen address")
	data := fs.String("data", "", "data directory (default ./.molt or MOLT_DATA)")
	tick := fs.Duration("tick", 10*time.Second, "maintenance pass interval")
	searxng := fs.String("searxng", "", "base URL of a SearXNG JSON API for web search (default MOLT_SEARXNG_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *tick < time.Second {
		return fmt.Errorf("--tick must be at least 1s")
	}
	// On the local backend this process owns its data directory: the lock
	// makes that true, and lets it recover its previous run's claims at once.
	cfg := app.ConfigFromEnv(os.Environ())
	if *data != "" {
		cfg.DataDir = *data
	}
	if *searxng != "" {
		cfg.Search.SearXNGURL = *searxng
	}
	cfg.Supervisor.Tick = *tick // a campaign's heartbeat rounds up to the tick
	local := cfg.Backend != app.BackendAWS
	if local {
		unlock, err := localbackend.LockDataDir(cfg.DataDir)
		if err != nil {
			return err
		}
		defer unlock()
	}
	a, err := openConfig(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	return a.Serve(ctx, app.ServeOptions{Addr: *addr, Tick: *tick, AdminToken: os.Getenv("MOLT_ADMIN_TOKEN"), Out: stdout,
		Recover: local, SearXNGProbe: 30 * time.Second})
}

const tokenUsage = "usage: molt token create|list|revoke ID|rotate-admin [--data DIR]"

func token(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 {
		return errors.New(tokenUsage)
	}
	sub, args := args[0], args[1:]
	fs := flag.NewFlagSet("token "+sub, flag.ContinueOnError)
	data := fs.String("data", "", "data directory (default ./.molt or MOLT_DATA)")
	var level, ws, name *string
	var id string
	switch sub {
	case "create":
		level = fs.String("level", "", "full, workspace or readonly")
		ws = fs.String("workspace", "", "workspace (required unless --level full; it must exist)")
		name = fs.String("name", "", "a name to recognise the token by")
	case "revoke":
		if len(args) > 0 && !strings.HasPrefix(args[0], "-") {
			id, args = args[0], args[1:]
		}
	case "list", "rotate-admin":
	default:
		return errors.New(tokenUsage)
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if sub == "revoke" && id == "" && fs.NArg() == 1 {
		id = fs.Arg(0)
	} else if fs.NArg() > 0 {
		return errors.New(tokenUsage)
	}
	if sub == "revoke" && id == "" {
		return errors.New("usage: molt token revoke ID (the id `molt token list` shows)")
	}
	a, err := open(ctx, *data, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	switch sub {
	case "create":
		secret, tok, err := a.Tokens.Create(ctx, auth.Operator, auth.Level(*level), *ws, *name)
		if err != nil {
			return err
		}
		scope := "all workspaces"
		if tok.Workspace != "" {
			scope = "workspace " + tok.Workspace
		}
		fmt.Fprintf(stdout, "created %s token %s for %s; the secret is shown once:\n%s\n", tok.Level, tok.ID, scope, secret)
	case "list":
		ts, err := a.Tokens.List(ctx, auth.Operator)
		if err != nil {
			return err
		}
		printTokens(stdout, ts)
	case "revoke":
		tok, err := a.Tokens.Revoke(ctx, auth.Operator, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "revoked %s token %s (%s) at %s\n", tok.Level, tok.ID, orDash(tok.Name), tok.RevokedAt.Format(time.RFC3339))
	case "rotate-admin":
		secret, tok, err := a.RotateAdminToken(ctx, os.Getenv("MOLT_ADMIN_TOKEN"))
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "new admin token %s saved to %s; the old one is revoked:\n%s\n",
			tok.ID, filepath.Join(a.Config.DataDir, app.AdminTokenFile), secret)
	}
	return nil
}

// printTokens writes one line per token: never a secret or a hash.
func printTokens(w io.Writer, ts []auth.Token) {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tLEVEL\tWORKSPACE\tNAME\tCREATED\tLAST USED\tREVOKED")
	when := func(t time.Time) string {
		if t.IsZero() {
			return "-"
		}
		return t.UTC().Format(time.RFC3339)
	}
	for _, t := range ts {
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%s\t%s\n", t.ID, t.Level, orDash(t.Workspace), orDash(t.Name),
			when(t.CreatedAt), when(t.LastUsedAt), when(t.RevokedAt))
	}
	_ = tw.Flush()
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func invoke(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 || args[0] == "" || args[0][0] == '-' {
		return fmt.Errorf("usage: molt invoke <function> --event FILE")
	}
	fn := args[0]
	fs := flag.NewFlagSet("invoke", flag.ContinueOnError)
	event := fs.String("event", "", "event JSON file")
	data := fs.String("data", "", "data directory (default ./.molt or MOLT_DATA)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	if *event == "" {
		return fmt.Errorf("--event is required")
	}
	payload, err := os.ReadFile(*event)
	if err != nil {
		return err
	}
	a, err := open(ctx, *data, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	h, err := a.Function(fn)
	if err != nil {
		return fmt.Errorf("%w (functions: %v)", err, a.FunctionNames())
	}
	out, err := h.Invoke(ctx, payload)
	if err != nil {
		return fmt.Errorf("invoke %s: %w", fn, err)
	}
	fmt.Fprintln(stdout, string(out))
	return nil
}

// resolve prints, as JSON, how a message would route in a workspace
// (delegate.Resolve over its agents and registered remotes); it dispatches
// nothing.
func resolve(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	fs := flag.NewFlagSet("resolve", flag.ContinueOnError)
	ws := fs.String("workspace", "", "workspace whose agents and remotes are the targets")
	data := fs.String("data", "", "data directory (default ./.molt or MOLT_DATA)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if *ws == "" || fs.NArg() != 1 {
		return fmt.Errorf("usage: molt resolve --workspace WS 'message'")
	}
	a, err := open(ctx, *data, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	if _, err := a.Store.GetWorkspace(ctx, *ws); err != nil {
		return fmt.Errorf("workspace %s: %w", *ws, err)
	}
	reg, err := a.Delegate.Registry(ctx, *ws)
	if err != nil {
		return err
	}
	enc := json.NewEncoder(stdout)
	enc.SetIndent("", "  ")
	return enc.Encode(delegate.Resolve(fs.Arg(0), reg))
}
