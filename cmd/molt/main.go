// Command molt runs molt on one machine and helps develop and operate it:
//
//	molt serve [--addr 127.0.0.1:8080] [--data ./.molt] [--tick 10s]
//	molt token create --level full|workspace|readonly [--workspace WS] [--name N] [--data DIR]
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
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/molt-dev/molt/internal/app"
	"github.com/molt-dev/molt/internal/auth"
	"github.com/molt-dev/molt/internal/awsbackend"
	"github.com/molt-dev/molt/internal/buildinfo"
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
  molt invoke <function> --event FILE [--data DIR]
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

func token(ctx context.Context, args []string, stdout io.Writer, logger *slog.Logger) error {
	if len(args) == 0 || args[0] != "create" {
		return fmt.Errorf("usage: molt token create --level full|workspace|readonly [--workspace WS]")
	}
	fs := flag.NewFlagSet("token create", flag.ContinueOnError)
	level := fs.String("level", "", "full, workspace or readonly")
	ws := fs.String("workspace", "", "workspace (required unless --level full)")
	name := fs.String("name", "", "a name to recognise the token by")
	data := fs.String("data", "", "data directory (default ./.molt or MOLT_DATA)")
	if err := fs.Parse(args[1:]); err != nil {
		return err
	}
	a, err := open(ctx, *data, logger)
	if err != nil {
		return err
	}
	defer a.Close()
	secret, tok, err := a.CreateToken(ctx, auth.Level(*level), *ws, *name)
	if err != nil {
		return err
	}
	scope := "all workspaces"
	if tok.Workspace != "" {
		scope = "workspace " + tok.Workspace
	}
	fmt.Fprintf(stdout, "created %s token %s for %s; the secret is shown once:\n%s\n", tok.Level, tok.ID, scope, secret)
	return nil
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
