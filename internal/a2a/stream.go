package a2a

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"time"

	"github.com/molt-dev/molt/internal/auth"
)

// stream answers with an SSE stream of task t's events, read from the store
// (so a worker on any instance is seen): the task first, a status update at
// every change of state, the reply as an artifact, and the final status;
// then the stream ends. It ends too after StreamFor or when the client goes.
func (h *Handler) stream(w http.ResponseWriter, r *http.Request, c auth.Caller, ref agentRef, v string, id json.RawMessage, t task, first bool) {
	rc := http.NewResponseController(w)
	_ = rc.SetWriteDeadline(time.Now().Add(h.cfg.StreamFor + time.Minute)) // past the server's WriteTimeout
	hd := w.Header()
	hd.Set("Content-Type", "text/event-stream")
	hd.Set("Cache-Control", "no-cache")
	hd.Set("X-Accel-Buffering", "no")
	w.WriteHeader(http.StatusOK)
	send := func(result any) bool {
		b, err := json.Marshal(map[string]any{"jsonrpc": "2.0", "id": rawID(id), "result": result})
		if err != nil {
			return false
		}
		if _, err := w.Write(append(append([]byte("data: "), b...), '\n', '\n')); err != nil {
			return false
		}
		// A writer that cannot flush writes through (lambdaurl's pipe to the
		// function URL's response stream): nothing is held back.
		err = rc.Flush()
		return err == nil || errors.Is(err, http.ErrNotSupported)
	}
	tw := t.wire(v, true, false)
	if v == V10 {
		tw = map[string]any{"task": tw}
	}
	if !send(tw) {
		return
	}
	ctx, cancel := context.WithTimeout(r.Context(), h.cfg.StreamFor)
	defer cancel()
	tick := time.NewTicker(h.cfg.Poll)
	defer tick.Stop()
	last := t.State
	for !terminal(last) {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		nt, _, err := h.loadTask(ctx, c, ref, t.ID)
		if err != nil {
			if ctx.Err() == nil {
				continue
			}
			return
		}
		if nt.State == last {
			continue
		}
		last = nt.State
		if nt.State == "TASK_STATE_COMPLETED" && nt.Reply != "" {
			if !send(nt.artifactEvent(v)) {
				return
			}
		}
		if !send(nt.statusEvent(v)) {
			return
		}
	}
}
