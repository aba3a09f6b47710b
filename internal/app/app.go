package app

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"

	"github.com/aws/aws-sdk-go-v2/service/dynamodb"
	"github.com/aws/aws-sdk-go-v2/service/s3"
	"github.com/aws/aws-sdk-go-v2/service/sqs"

	"github.com/molt-dev/molt/internal/awsenv"
	"github.com/molt-dev/molt/internal/blob"
	"github.com/molt-dev/molt/internal/buildinfo"
	"github.com/molt-dev/molt/internal/dirblob"
	"github.com/molt-dev/molt/internal/dynamo"
	"github.com/molt-dev/molt/internal/httpapi"
	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/s3blob"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/sqlite"
	"github.com/molt-dev/molt/internal/sqsqueue"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/work"
)

// App is molt's wired-up dependencies. Build it once per process (outside a
// Lambda handler) with Open; Close releases what it opened.
type App struct {
	Config   Config
	Store    store.Store
	Blobs    blob.Store
	Queue    queue.Sender
	Clock    molt.Clock
	IDs      molt.IDs
	Logger   *slog.Logger
	Protocol *work.Protocol

	// Local backend: the in-process queues workers receive from.
	Local *memqueue.Queues
	// AWS backend: the SQS client, for receivers in `molt serve` on aws.
	SQS *sqs.Client

	workers []Worker
	closers []func() error
}

// Worker is a kind of background work: its policy (from settings) and its
// wake-up handler. Features register theirs in Open.
type Worker struct {
	Kind    work.Kind
	Policy  func(settings.Settings) work.Policy
	Handler queue.Handler
}

// Open builds the adapters cfg names.
func Open(ctx context.Context, cfg Config, logger *slog.Logger) (*App, error) {
	if err := cfg.Validate(); err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	a := &App{Config: cfg, Clock: clock, IDs: ids, Logger: logger}
	switch cfg.Backend {
	case BackendLocal:
		if err := os.MkdirAll(cfg.DataDir, 0o700); err != nil {
			return nil, fmt.Errorf("create data dir: %w", err)
		}
		st, err := sqlite.Open(cfg.DBPath(), sqlite.Options{Clock: clock, IDs: ids})
		if err != nil {
			return nil, fmt.Errorf("open store: %w", err)
		}
		a.closers = append(a.closers, st.Close)
		blobs, err := dirblob.New(cfg.BlobDir())
		if err != nil {
			_ = st.Close()
			return nil, fmt.Errorf("open blobs: %w", err)
		}
		a.closers = append(a.closers, blobs.Close)
		a.Store, a.Blobs = st, blobs
		a.Local = memqueue.New()
		a.Queue = a.Local
	case BackendAWS:
		awsCfg, err := awsenv.Load(ctx)
		if err != nil {
			return nil, err
		}
		a.Store = dynamo.New(dynamodb.NewFromConfig(awsCfg), cfg.Table, dynamo.Options{Clock: clock, IDs: ids})
		a.Blobs = s3blob.New(s3.NewFromConfig(awsCfg, s3blob.ClientOptions()), cfg.Bucket)
		a.SQS = sqs.NewFromConfig(awsCfg)
		a.Queue = sqsqueue.New(a.SQS, cfg.Queues)
	}
	a.Protocol = &work.Protocol{Backend: a.Store, Clock: clock, IDs: ids}
	for _, r := range registry {
		a.workers = append(a.workers, r.build(a))
	}
	return a, nil
}

// Close releases the store.
func (a *App) Close() error {
	var errs []error
	for i := len(a.closers) - 1; i >= 0; i-- {
		errs = append(errs, a.closers[i]())
	}
	return errors.Join(errs...)
}

// Workers returns the registered kinds of background work.
func (a *App) Workers() []Worker { return a.workers }

// HTTPHandler returns the UI API.
func (a *App) HTTPHandler() http.Handler {
	return httpapi.New(httpapi.Config{Store: a.Store, Clock: a.Clock, Logger: a.Logger,
		Version: buildinfo.Version, SHA: buildinfo.SHA})
}

// Maintainer returns the tick's maintenance pass over every registered kind, with
// policies read from the settings at each pass.
func (a *App) Maintainer() *work.Maintainer {
	return &work.Maintainer{Protocol: a.Protocol, Queue: a.Queue, Logger: a.Logger,
		Policies: func(ctx context.Context) ([]work.Policy, error) {
			s, err := a.Store.GetSettings(ctx)
			if err != nil {
				return nil, err
			}
			pols := make([]work.Policy, 0, len(a.workers))
			for _, w := range a.workers {
				pols = append(pols, w.Policy(s))
			}
			return pols, nil
		}}
}

// Kinds lists the kinds of background work molt registers, i.e. the queues
// `molt bootstrap` creates.
func Kinds() []string {
	var ks []string
	for _, w := range registry {
		ks = append(ks, string(w.kind))
	}
	return ks
}

// registry lists the kinds of work features register: each entry builds its
// worker from the app. Features add themselves here as they land.
var registry []struct {
	kind  work.Kind
	build func(a *App) Worker
}
