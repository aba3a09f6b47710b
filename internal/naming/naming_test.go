package naming_test

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"sync"
	"testing"
	"time"

	"github.com/molt-dev/molt/internal/memqueue"
	"github.com/molt-dev/molt/internal/model"
	"github.com/molt-dev/molt/internal/model/offline"
	"github.com/molt-dev/molt/internal/molt"
	"github.com/molt-dev/molt/internal/naming"
	"github.com/molt-dev/molt/internal/queue"
	"github.com/molt-dev/molt/internal/session"
	"github.com/molt-dev/molt/internal/settings"
	"github.com/molt-dev/molt/internal/store"
	"github.com/molt-dev/molt/internal/storetest/adapters"
	"github.com/molt-dev/molt/internal/work"
	"github.com/molt-dev/molt/internal/workspace"
)

// gateModel answers like the offline model, after before (when set) returns.
type gateModel struct {
	mu     sync.Mutex
	before func(ctx context.Context) error
	text   string
}

func (m *gateModel) Name() string { return "gate" }
func (m *gateModel) Generate(ctx context.Context, req model.Request) (model.Response, error) {
	m.mu.Lock()
	before, text := m.before, m.text
	m.mu.Unlock()
	if before != nil {
		if err := before(ctx); err != nil {
			return model.Response{}, err
		}
	}
	if text != "" {
		return model.Response{Text: text}, nil
	}
	return offline.New().Generate(ctx, req)
}

type fixture struct {
	t     *testing.T
	ctx   context.Context
	st    store.Store
	proto *work.Protocol
	svc   *naming.Service
	model *gateModel
	q     *memqueue.Queues
}

func setup(t *testing.T, open adapters.Opener, mode string) *fixture {
	t.Helper()
	clock := molt.SystemClock{}
	ids := &molt.SortableIDs{Clock: clock}
	st := open(t, clock, ids)
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	if _, _, err := st.PutWorkspace(ctx, workspace.Workspace{Name: "acme"}); err != nil {
		t.Fatal(err)
	}
	s := settings.Default()
	s.Naming.Mode, s.Naming.TimeoutSeconds = mode, 1
	if err := st.PutSettings(ctx, s); err != nil {
		t.Fatal(err)
	}
	proto := &work.Protocol{Backend: st, Clock: clock, IDs: ids}
	m := &gateModel{}
	q := memqueue.New()
	svc := naming.New(naming.Deps{Store: st, Protocol: proto, Queue: q, Model: m, Clock: clock,
		Logger: slog.New(slog.NewJSONHandler(io.Discard, nil))}, naming.Config{})
	return &fixture{t: t, ctx: ctx, st: st, proto: proto, svc: svc, model: m, q: q}
}

// conversation opens a session with n user/assistant pairs.
func (f *fixture) conversation(id string, n int) session.Session {
	f.t.Helper()
	ss, err := f.st.CreateSession(f.ctx, session.Session{ID: id, Workspace: "acme", Agent: "main", Access: session.AccessFull})
	if err != nil {
		f.t.Fatal(err)
	}
	f.add(ss.ID, n)
	return f.get(ss.ID)
}

func (f *fixture) add(id string, n int) {
	f.t.Helper()
	ss := f.get(id)
	var ops []work.Op
	for i := 0; i < n; i++ {
		ops = append(ops,
			session.AppendMessage{Message: session.Message{SessionID: id, Seq: ss.NextSeq + 2*i, Role: session.RoleUser, Text: "plan a trip to Rome in May"}},
			session.AppendMessage{Message: session.Message{SessionID: id, Seq: ss.NextSeq + 2*i + 1, Role: session.RoleAssistant, Text: "Sure."}})
	}
	if err := f.st.Commit(f.ctx, ops...); err != nil {
		f.t.Fatal(err)
	}
}

func (f *fixture) get(id string) session.Session {
	f.t.Helper()
	ss, err := f.st.GetSession(f.ctx, id)
	if err != nil {
		f.t.Fatal(err)
	}
	return ss
}

// run handles the wake-up of job id (as the worker would).
func (f *fixture) run(id string) {
	f.t.Helper()
	if err := f.svc.Handle(f.ctx, queue.Message{Kind: string(work.KindNaming), ID: id}); err != nil {
		f.t.Fatalf("handle %s: %v", id, err)
	}
}

func (f *fixture) job(ss session.Session, seq int) work.Item {
	f.t.Helper()
	it, err := f.st.GetItem(f.ctx, work.KindNaming, naming.JobID(ss.ID, ss.CreatedAt, seq))
	if err != nil {
		f.t.Fatalf("job of %s at %d: %v", ss.ID, seq, err)
	}
	return it
}

func wantJob(t *testing.T, it work.Item, status work.Status, reason string) {
	t.Helper()
	if it.Status != status || it.Reason != reason {
		t.Fatalf("job %s = %s/%q, want %s/%q", it.ID, it.Status, it.Reason, status, reason)
	}
}

func TestNamesOnceAndSuppressesDuplicates(t *testing.T) {
	adapters.Each(t, func(t *testing.T, open adapters.Opener) {
		f := setup(t, open, settings.NamingOnce)
		ss := f.conversation("s1", 1)
		f.svc.Replied(f.ctx, ss, 2)
		f.svc.Replied(f.ctx, ss, 2) // a duplicate request: suppressed
		f.run(naming.JobID(ss.ID, ss.CreatedAt, 2))
		f.run(naming.JobID(ss.ID, ss.CreatedAt, 2)) // a duplicate wake-up: harmless
		got := f.get(ss.ID)
		if got.Title != "Offline: plan a trip to Rome in" || got.TitleSource != session.TitleAuto || got.TitleRev != 1 {
			t.Fatalf("after naming: %+v", got)
		}
		wantJob(t, f.job(ss, 2), naming.StatusDone, "")
		// Once: a later reply asks for nothing more.
		f.add(ss.ID, 1)
		f.svc.Replied(f.ctx, f.get(ss.ID), 4)
		if got := f.get(ss.ID); got.NamingSeq != 2 {
			t.Fatalf("once mode asked again: naming seq %d", got.NamingSeq)
		}
	})
}

func TestManualRenameWins(t *testing.T) {
	adapters.Each(t, func(t *testing.T, open adapters.Opener) {
		for _, mode := range []string{settings.NamingOnce, settings.NamingAlways} {
			f := setup(t, open, mode)
			// Before: the job ends stale when it runs.
			a := f.conversation("before-"+mode, 1)
			f.svc.Replied(f.ctx, a, 2)
			if _, err := f.st.SetTitle(f.ctx, a.ID, "Mine", session.TitleManual, 0); err != nil {
				t.Fatal(err)
			}
			f.run(naming.JobID(a.ID, a.CreatedAt, 2))
			wantJob(t, f.job(a, 2), naming.StatusFailed, naming.ReasonStale)
			// During: the rename lands while the model answers.
			b := f.conversation("during-"+mode, 1)
			f.model.before = func(context.Context) error {
				_, err := f.st.SetTitle(f.ctx, b.ID, "Mine", session.TitleManual, 0)
				return err
			}
			f.svc.Replied(f.ctx, b, 2)
			f.run(naming.JobID(b.ID, b.CreatedAt, 2))
			f.model.before = nil
			wantJob(t, f.job(b, 2), naming.StatusFailed, naming.ReasonStale)
			for _, id := range []string{a.ID, b.ID} {
				if got := f.get(id); got.Title != "Mine" || got.TitleSource != session.TitleManual {
					t.Fatalf("%s: manual title lost: %+v", id, got)
				}
			}
			// A request by hand never replaces a manual title.
			_, err := f.svc.NameByHand(f.ctx, fullCaller, a.ID)
			if molt.ErrorReason(err) != naming.ReasonTitleManual {
				t.Fatalf("name by hand over a manual title: %v", err)
			}
		}
	})
}

func TestDeleteAndRecreateRaceTheSave(t *testing.T) {
	adapters.Each(t, func(t *testing.T, open adapters.Opener) {
		f := setup(t, open, settings.NamingOnce)
		ss := f.conversation("same-id", 1)
		f.model.before = func(context.Context) error {
			if err := f.st.DeleteSession(f.ctx, ss.ID); err != nil {
				return err
			}
			time.Sleep(2 * time.Millisecond) // a new created_at
			_, err := f.st.CreateSession(f.ctx, session.Session{ID: ss.ID, Workspace: "acme", Agent: "main", Access: session.AccessFull})
			return err
		}
		f.svc.Replied(f.ctx, ss, 2)
		f.run(naming.JobID(ss.ID, ss.CreatedAt, 2))
		wantJob(t, f.job(ss, 2), naming.StatusFailed, naming.ReasonStale)
		if got := f.get(ss.ID); got.Title != "" || got.NamingSeq != 0 {
			t.Fatalf("the old session's job named the new one: %+v", got)
		}
		// Deleted while pending: nothing saved, the job ends quietly.
		f.model.before = nil
		d := f.conversation("doomed", 1)
		f.svc.Replied(f.ctx, d, 2)
		if err := f.st.DeleteSession(f.ctx, d.ID); err != nil {
			t.Fatal(err)
		}
		f.run(naming.JobID(d.ID, d.CreatedAt, 2))
		wantJob(t, f.job(d, 2), naming.StatusFailed, naming.ReasonStale)
		if _, err := f.st.GetSession(f.ctx, d.ID); molt.ErrorCode(err) != molt.ENOTFOUND {
			t.Fatalf("deleted session came back: %v", err)
		}
	})
}

func TestOnceVersusAlwaysWithMessagesArriving(t *testing.T) {
	adapters.Each(t, func(t *testing.T, open adapters.Opener) {
		// Once: the running job completes although more messages arrive and a
		// later reply asks again.
		f := setup(t, open, settings.NamingOnce)
		ss := f.conversation("once", 1)
		f.model.before = func(context.Context) error {
			f.add(ss.ID, 1)
			f.svc.Replied(f.ctx, f.get(ss.ID), 4)
			return nil
		}
		f.svc.Replied(f.ctx, ss, 2)
		f.run(naming.JobID(ss.ID, ss.CreatedAt, 2))
		wantJob(t, f.job(ss, 2), naming.StatusDone, "")
		if got := f.get(ss.ID); got.TitleSource != session.TitleAuto || got.NamingSeq != 2 {
			t.Fatalf("once: %+v", got)
		}

		// Always: a newer request supersedes the running job and the pending one.
		g := setup(t, open, settings.NamingAlways)
		as := g.conversation("always", 1)
		g.model.before = func(context.Context) error {
			g.add(as.ID, 1)
			g.svc.Replied(g.ctx, g.get(as.ID), 4)
			return nil
		}
		g.svc.Replied(g.ctx, as, 2)
		g.run(naming.JobID(as.ID, as.CreatedAt, 2))
		g.model.before = nil
		wantJob(t, g.job(as, 2), naming.StatusFailed, naming.ReasonSuperseded)
		g.model.text = "Rome in May"
		g.run(naming.JobID(as.ID, as.CreatedAt, 4))
		wantJob(t, g.job(as, 4), naming.StatusDone, "")
		if got := g.get(as.ID); got.Title != "Rome in May" || got.TitleRev != 1 {
			t.Fatalf("always: %+v", got)
		}
		// Always follows the conversation: the next reply renames.
		g.add(as.ID, 1)
		g.model.text = "Rome and Florence"
		g.svc.Replied(g.ctx, g.get(as.ID), 6)
		g.run(naming.JobID(as.ID, as.CreatedAt, 6))
		if got := g.get(as.ID); got.Title != "Rome and Florence" || got.TitleRev != 2 {
			t.Fatalf("always, second reply: %+v", got)
		}
	})
}

func TestTimeoutInvalidOutputDisabled(t *testing.T) {
	adapters.Each(t, func(t *testing.T, open adapters.Opener) {
		f := setup(t, open, settings.NamingOnce) // timeout_seconds 1
		ss := f.conversation("hang", 1)
		f.model.before = func(ctx context.Context) error {
			<-ctx.Done() // a provider that hangs until the job's timeout
			return model.ContextFailure(ctx, ctx, "hanging")
		}
		f.svc.Replied(f.ctx, ss, 2)
		start := time.Now()
		f.run(naming.JobID(ss.ID, ss.CreatedAt, 2))
		if el := time.Since(start); el > 5*time.Second {
			t.Fatalf("the job took %s, over its 1 s timeout", el)
		}
		wantJob(t, f.job(ss, 2), naming.StatusFailed, naming.ReasonTimeout)

		f.model.before, f.model.text = nil, "```\n**  ** \n"
		bad := f.conversation("bad", 1)
		f.svc.Replied(f.ctx, bad, 2)
		f.run(naming.JobID(bad.ID, bad.CreatedAt, 2))
		wantJob(t, f.job(bad, 2), naming.StatusFailed, naming.ReasonInvalidOutput)

		f.model.text = ""
		f.model.before = func(context.Context) error { return errors.New("boom") }
		pe := f.conversation("provider", 1)
		f.svc.Replied(f.ctx, pe, 2)
		f.run(naming.JobID(pe.ID, pe.CreatedAt, 2))
		wantJob(t, f.job(pe, 2), naming.StatusFailed, naming.ReasonProviderError)
		for _, id := range []string{ss.ID, bad.ID, pe.ID} {
			if got := f.get(id); got.Title != "" {
				t.Fatalf("%s: a failed job set a title: %+v", id, got)
			}
		}
		// By hand: the failed job is tried again, and names the session.
		f.model.before = nil
		it, err := f.svc.NameByHand(f.ctx, fullCaller, ss.ID)
		if err != nil || it.Status != work.StatusPending {
			t.Fatalf("name by hand: %+v %v", it, err)
		}
		f.run(it.ID)
		if got := f.get(ss.ID); got.TitleSource != session.TitleAuto {
			t.Fatalf("by hand: %+v", got)
		}

		// Disabled: nothing is asked for; a pending job ends disabled.
		pend := f.conversation("pend", 1)
		f.svc.Replied(f.ctx, pend, 2)
		s := settings.Default()
		s.Naming.Mode = settings.NamingDisabled
		if err := f.st.PutSettings(f.ctx, s); err != nil {
			t.Fatal(err)
		}
		f.run(naming.JobID(pend.ID, pend.CreatedAt, 2))
		wantJob(t, f.job(pend, 2), naming.StatusFailed, naming.ReasonDisabled)
		off := f.conversation("off", 1)
		f.svc.Replied(f.ctx, off, 2)
		if got := f.get(off.ID); got.NamingSeq != 0 {
			t.Fatalf("disabled asked for a job: %+v", got)
		}
	})
}

var fullCaller = authFull()
