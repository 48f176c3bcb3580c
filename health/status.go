package health

import (
	"context"
	"net/http"
	"time"
)

// maxStoreReads is how many requests (GET /status, and GET /leader of a
// semaphore) may ask the store at once: a reading is a store request, and
// a crowd of readers must not load the store. Beyond it /status answers
// 503 with Retry-After and /leader names the leader alone.
const maxStoreReads = 4

// tryRead takes one of the store reads requests may make at once; it
// reports false when all are taken. The caller calls done when it took one.
func (s *Server) tryRead() bool {
	select {
	case s.reads <- struct{}{}:
		return true
	default:
		return false
	}
}

func (s *Server) doneRead() { <-s.reads }

// statusHandler serves GET /status: Config.Status's report, 200 when the
// store answered, else 503; 501 without Config.Status.
func (s *Server) statusHandler() http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if s.cfg.Status == nil {
			writeError(w, http.StatusNotImplemented, "status is not served by this process")
			return
		}
		if !s.tryRead() {
			w.Header().Set("Retry-After", "1")
			writeError(w, http.StatusServiceUnavailable, "too many status requests at once")
			return
		}
		defer s.doneRead()
		ctx, cancel := context.WithTimeout(r.Context(), s.healthTimeout)
		defer cancel()
		rep, ok := s.cfg.Status(ctx)
		code := http.StatusOK
		if !ok {
			code = http.StatusServiceUnavailable
		}
		writeJSON(w, code, rep)
	})
}

// holdersOf is "holders" as the view knows them: the leader alone, or
// none.
func holdersOf(l *leaderJSON) []leaderJSON {
	if l == nil {
		return []leaderJSON{}
	}
	return []leaderJSON{*l}
}

// semaphoreHolders replaces d's holders with every holder of a semaphore
// (Config.Holders), when a leader is known; it leaves them be if the store
// does not answer in time.
func (s *Server) semaphoreHolders(ctx context.Context, d *leaderDoc) {
	if s.cfg.Holders == nil || d.Leader == nil {
		return
	}
	if !s.tryRead() {
		s.log.Debug("too many store reads at once; /leader shows the semaphore's leader alone")
		return
	}
	defer s.doneRead()
	ctx, cancel := context.WithTimeout(ctx, s.healthTimeout)
	defer cancel()
	hs, err := s.cfg.Holders(ctx)
	if err != nil || len(hs) == 0 {
		s.log.Debug("cannot list the semaphore's holders for /leader; showing the leader alone", "err", err)
		return
	}
	d.Holders = make([]leaderJSON, 0, len(hs))
	for _, h := range hs {
		d.Holders = append(d.Holders, leaderJSON{ID: h.ID, Address: h.Address, FencingToken: h.Token,
			Since: h.Since.UTC().Format(time.RFC3339Nano)})
	}
}
