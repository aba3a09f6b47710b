// Command river-bench runs River, the Go job queue on PostgreSQL, on the
// workload of molt's peer benchmark (BenchmarkPeer in internal/sqlite): N no-op
// jobs worked by 16 workers, and the pickup latency from the start of a job's
// insert to the start of its work. It is its own module so that molt's go.mod
// does not carry River and pgx. `make bench-peer` (scripts/bench-peer.sh) runs
// it against a private PostgreSQL cluster, alternating with molt.
//
// It prints one line in the format of a Go benchmark result:
//
//	BenchmarkPeer/river-default  N  <jobs/s> jobs/s  <p50> pickup-p50-ms  <p90> pickup-p90-ms
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/pgxpool"
	"github.com/riverqueue/river"
	"github.com/riverqueue/river/riverdriver/riverpgxv5"
	"github.com/riverqueue/river/rivermigrate"
)

// noopArgs is a job that does nothing; Seq identifies it for the latency phase.
type noopArgs struct {
	Seq int `json:"seq"`
}

func (noopArgs) Kind() string { return "noop" }

type noopWorker struct {
	river.WorkerDefaults[noopArgs]
	started func(seq int)
}

func (w *noopWorker) Work(ctx context.Context, job *river.Job[noopArgs]) error {
	if w.started != nil {
		w.started(job.Args.Seq)
	}
	return nil
}

type config struct {
	dsn       string
	n         int
	latencyN  int
	workers   int
	tuned     bool
	interval  time.Duration
	timeLimit time.Duration
}

func main() {
	var c config
	flag.StringVar(&c.dsn, "dsn", os.Getenv("DATABASE_URL"), "PostgreSQL connection string")
	flag.IntVar(&c.n, "n", 2000, "jobs in the throughput phase")
	flag.IntVar(&c.latencyN, "latency-n", 200, "jobs inserted one at a time in the latency phase")
	flag.IntVar(&c.workers, "workers", 16, "workers (MaxWorkers of the one queue)")
	flag.BoolVar(&c.tuned, "tuned", false, "fetch cooldown 1 ms and poll 50 ms instead of River's defaults (100 ms, 1 s)")
	flag.DurationVar(&c.interval, "interval", 5*time.Millisecond, "pause between inserts in the latency phase")
	flag.DurationVar(&c.timeLimit, "timeout", 5*time.Minute, "give up after this long")
	flag.Parse()
	if err := run(c, os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "river-bench:", err)
		os.Exit(1)
	}
}

func run(c config, out io.Writer) error {
	ctx, cancel := context.WithTimeout(context.Background(), c.timeLimit)
	defer cancel()
	pool, err := pgxpool.New(ctx, c.dsn)
	if err != nil {
		return fmt.Errorf("connect: %w", err)
	}
	defer pool.Close()
	migrator, err := rivermigrate.New(riverpgxv5.New(pool), nil)
	if err != nil {
		return err
	}
	if _, err := migrator.Migrate(ctx, rivermigrate.DirectionUp, nil); err != nil {
		return fmt.Errorf("migrate: %w", err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}

	jobsPerSec, err := throughput(ctx, c, pool)
	if err != nil {
		return fmt.Errorf("throughput: %w", err)
	}
	if _, err := pool.Exec(ctx, "TRUNCATE river_job"); err != nil {
		return fmt.Errorf("truncate: %w", err)
	}
	lat, err := latency(ctx, c, pool)
	if err != nil {
		return fmt.Errorf("latency: %w", err)
	}
	name := "river-default"
	if c.tuned {
		name = "river-tuned"
	}
	fmt.Fprintf(out, "BenchmarkPeer/%s \t%d\t%.1f jobs/s\t%.3f pickup-p50-ms\t%.3f pickup-p90-ms\n",
		name, c.n, jobsPerSec, ms(quantile(lat, 0.5)), ms(quantile(lat, 0.9)))
	return nil
}

func newClient(c config, pool *pgxpool.Pool, started func(int)) (*river.Client[pgx5Tx], error) {
	workers := river.NewWorkers()
	river.AddWorker(workers, &noopWorker{started: started})
	cfg := &river.Config{
		Queues:  map[string]river.QueueConfig{river.QueueDefault: {MaxWorkers: c.workers}},
		Workers: workers,
		Logger:  slog.New(slog.NewTextHandler(io.Discard, nil)),
	}
	if c.tuned {
		cfg.FetchCooldown, cfg.FetchPollInterval = time.Millisecond, 50*time.Millisecond
	}
	return river.NewClient(riverpgxv5.New(pool), cfg)
}

// throughput inserts c.n jobs before the client starts, then measures from
// Start to the last completion event (a completion is reported once it is
// committed), in jobs per second.
func throughput(ctx context.Context, c config, pool *pgxpool.Pool) (float64, error) {
	client, err := newClient(c, pool, nil)
	if err != nil {
		return 0, err
	}
	params := make([]river.InsertManyParams, c.n)
	for i := range params {
		params[i] = river.InsertManyParams{Args: noopArgs{Seq: i}}
	}
	if _, err := client.InsertManyFast(ctx, params); err != nil {
		return 0, err
	}
	events, cancelSub := client.SubscribeConfig(&river.SubscribeConfig{ChanSize: c.n + 16,
		Kinds: []river.EventKind{river.EventKindJobCompleted, river.EventKindJobFailed}})
	defer cancelSub()
	start := time.Now()
	if err := client.Start(ctx); err != nil {
		return 0, err
	}
	defer stop(client)
	for done := 0; done < c.n; {
		select {
		case ev := <-events:
			if ev.Kind != river.EventKindJobCompleted {
				return 0, fmt.Errorf("job %d: %s", ev.Job.ID, ev.Kind)
			}
			done++
		case <-ctx.Done():
			return 0, fmt.Errorf("%d of %d completed: %w", done, c.n, ctx.Err())
		}
	}
	return float64(c.n) / time.Since(start).Seconds(), nil
}

// latency starts the client idle, then inserts c.latencyN jobs one at a time,
// c.interval apart, and returns each job's time from the start of its insert
// to the start of its work.
func latency(ctx context.Context, c config, pool *pgxpool.Pool) ([]time.Duration, error) {
	var (
		mu       sync.Mutex
		inserted = make([]time.Time, c.latencyN)
		lat      = make([]time.Duration, 0, c.latencyN)
		started  atomic.Int64
		all      = make(chan struct{})
	)
	client, err := newClient(c, pool, func(seq int) {
		now := time.Now()
		mu.Lock()
		lat = append(lat, now.Sub(inserted[seq]))
		mu.Unlock()
		if started.Add(1) == int64(c.latencyN) {
			close(all)
		}
	})
	if err != nil {
		return nil, err
	}
	if err := client.Start(ctx); err != nil {
		return nil, err
	}
	defer stop(client)
	time.Sleep(200 * time.Millisecond) // let the producer settle and listen
	for i := 0; i < c.latencyN; i++ {
		mu.Lock()
		inserted[i] = time.Now()
		mu.Unlock()
		if _, err := client.Insert(ctx, noopArgs{Seq: i}, nil); err != nil {
			return nil, err
		}
		time.Sleep(c.interval)
	}
	select {
	case <-all:
	case <-ctx.Done():
		return nil, fmt.Errorf("%d of %d started: %w", started.Load(), c.latencyN, ctx.Err())
	}
	mu.Lock()
	defer mu.Unlock()
	return slices.Clone(lat), nil
}

func stop(client *river.Client[pgx5Tx]) {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := client.Stop(ctx); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "river-bench: stop:", err)
	}
}

func quantile(d []time.Duration, q float64) time.Duration {
	if len(d) == 0 {
		return 0
	}
	s := slices.Clone(d)
	slices.Sort(s)
	return s[min(len(s)-1, int(q*float64(len(s))))]
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// pgx5Tx is the transaction type of River's pgx v5 driver.
type pgx5Tx = pgx.Tx
