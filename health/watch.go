package health

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"

	"github.com/electd/electd/elector"
)

// handleWatch streams the leader as Server-Sent Events: one "leader" event
// at connect (leader null if none is known) and one at every change, with a
// comment line as heartbeat. It ends when the client goes away, the View
// stops, or Serve shuts down.
func (s *Server) handleWatch(w http.ResponseWriter, r *http.Request) {
	st, err := s.streams.join(r.RemoteAddr, time.Now(), s.writeTimeout)
	if err != nil {
		w.Header().Set("Retry-After", "5")
		writeError(w, http.StatusServiceUnavailable, err.Error())
		return
	}
	defer s.streams.leave(st)
	h := w.Header()
	h.Set("Content-Type", "text/event-stream")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Accel-Buffering", "no") // tell nginx-like proxies not to buffer
	if r.Method == http.MethodHead {
		w.WriteHeader(http.StatusOK)
		return
	}

	// The server's read and write timeouts are for ordinary requests; a
	// stream lives as long as its client reads it, up to maxStreamLife.
	// Each write has its own deadline (see send): a client that stops
	// reading loses its stream once its buffers are full. The read deadline
	// matters too: the server's background read would cancel the request
	// when it passes.
	rc := http.NewResponseController(w)
	if err := rc.SetReadDeadline(time.Time{}); err != nil {
		s.log.Debug("watch: cannot clear read deadline", "err", err)
	}
	send := func(write func() error) error {
		if err := rc.SetWriteDeadline(time.Now().Add(s.writeTimeout)); err != nil {
			s.log.Debug("watch: cannot set write deadline", "err", err)
		}
		if err := write(); err != nil {
			return err
		}
		return rc.Flush()
	}
	life := time.NewTimer(s.maxStreamLife)
	defer life.Stop()

	ctx := r.Context()
	updates := s.cfg.View.Subscribe(ctx)
	// The subscription holds the current value if one is known; otherwise
	// the first event says "no leader known" and the next one follows.
	var first elector.Leader
	known := false
	select {
	case l, ok := <-updates:
		if !ok {
			return
		}
		first, known = l, true
	default:
	}
	w.WriteHeader(http.StatusOK)
	if err := send(func() error { return s.writeLeader(w, first, known) }); err != nil {
		return
	}

	beat := time.NewTicker(s.heartbeat)
	defer beat.Stop()
	stop := stopping(ctx)
	for {
		select {
		case <-ctx.Done():
			return
		case <-stop:
			return
		case <-st.preempted: // a newer stream took the slot; the client reconnects
			return
		case <-life.C:
			return
		case l, ok := <-updates:
			if !ok {
				return
			}
			if err := send(func() error { return s.writeLeader(w, l, true) }); err != nil {
				return
			}
		case <-beat.C:
			if err := send(func() error { _, err := fmt.Fprint(w, ": heartbeat\n\n"); return err }); err != nil {
				return
			}
		}
	}
}

func (s *Server) writeLeader(w http.ResponseWriter, l elector.Leader, known bool) error {
	b, err := json.Marshal(s.doc(l, known))
	if err != nil {
		return fmt.Errorf("encode leader event: %w", err)
	}
	// json.Marshal output has no newlines, so one data line carries it.
	if _, err := fmt.Fprintf(w, "event: leader\ndata: %s\n\n", b); err != nil {
		return fmt.Errorf("write leader event: %w", err)
	}
	return nil
}
