package health

import (
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"fmt"
	"net"
	"net/http"
	"net/netip"
	"strings"
	"time"

	"github.com/electd/electd/elector"
)

// leaderDoc is the body of /leader and of each /leader/watch event.
type leaderDoc struct {
	Election string       `json:"election"`
	Leader   *leaderJSON  `json:"leader"`  // null when no leader is known
	Holders  []leaderJSON `json:"holders"` // every holder (a semaphore's N); [] when none is known
	Self     selfJSON     `json:"self"`
}

type leaderJSON struct {
	ID           string `json:"id"`
	Address      string `json:"address"`
	FencingToken uint64 `json:"fencing_token"`
	Since        string `json:"since"` // RFC 3339 with nanoseconds, UTC
}

type selfJSON struct {
	ID     string `json:"id"`
	Leader bool   `json:"leader"`
}

// doc describes l (known=false or a zero l: no leader known).
func (s *Server) doc(l elector.Leader, known bool) leaderDoc {
	d := leaderDoc{
		Election: s.cfg.Election,
		Self:     selfJSON{ID: s.cfg.SelfID, Leader: s.cfg.Leading()},
	}
	if known && !l.IsZero() {
		d.Leader = &leaderJSON{
			ID:           l.ID,
			Address:      l.Address,
			FencingToken: l.Token,
			Since:        l.Since.UTC().Format(time.RFC3339Nano),
		}
	}
	d.Holders = holdersOf(d.Leader)
	return d
}

func (s *Server) handleLeader(w http.ResponseWriter, r *http.Request) {
	d := s.doc(s.cfg.View.Current())
	s.semaphoreHolders(r.Context(), &d)
	code := http.StatusOK
	if d.Leader == nil {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, d)
}

type readyJSON struct {
	Ready  bool   `json:"ready"`
	Reason string `json:"reason"`
}

func (s *Server) handleReady(w http.ResponseWriter, r *http.Request) {
	ready, reason := s.cfg.Ready()
	code := s.cfg.NotReadyCode
	if ready {
		code = s.cfg.ReadyCode
	}
	writeJSON(w, code, readyJSON{Ready: ready, Reason: reason})
}

type statusJSON struct {
	Status       string            `json:"status"`
	Error        string            `json:"error,omitempty"`
	Containment  string            `json:"containment,omitempty"`   // /healthz only
	StoreErrors  []StoreFailure    `json:"store_errors,omitempty"`  // /healthz only
	StoreMembers []storeMemberJSON `json:"store_members,omitempty"` // /healthz only
	// /healthz only, with Config.ChildBackoff:
	ChildFailures *int       `json:"child_consecutive_failures,omitempty"`
	CoolDown      *float64   `json:"cool_down_seconds,omitempty"`
	CoolDownUntil *time.Time `json:"cool_down_until,omitempty"`
}

func (s *Server) handleLive(w http.ResponseWriter, r *http.Request) {
	if err := s.cfg.Live(); err != nil {
		writeJSON(w, http.StatusServiceUnavailable, statusJSON{Status: "error", Error: err.Error()})
		return
	}
	writeJSON(w, http.StatusOK, statusJSON{Status: "ok"})
}

// storeFailures is what Config.StoreFailures reports, nil without one.
func (s *Server) storeFailures() []StoreFailure {
	if s.cfg.StoreFailures == nil {
		return nil
	}
	return s.cfg.StoreFailures()
}

func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), s.healthTimeout)
	defer cancel()
	members, merr := s.storeMembers(ctx)
	ok := statusJSON{Status: "ok", Containment: s.cfg.Containment, StoreMembers: membersJSON(members)}
	if s.cfg.ChildBackoff != nil {
		n, d, until := s.cfg.ChildBackoff()
		secs := d.Seconds()
		ok.ChildFailures, ok.CoolDown = &n, &secs
		if !until.IsZero() {
			until = until.UTC()
			ok.CoolDownUntil = &until
		}
	}
	fail := func(msg string) statusJSON {
		d := ok
		d.Status, d.Error = "error", msg
		return d
	}
	if failing := s.storeFailures(); len(failing) > 0 {
		f := failing[0]
		d := fail(fmt.Sprintf("store %s failing since %s (%s; %d failed requests): %s", f.Op, f.Since.UTC().Format(time.RFC3339), f.Class, f.Failures, f.Error))
		d.StoreErrors = failing
		writeJSON(w, http.StatusServiceUnavailable, d)
		return
	}
	var err error
	switch {
	case merr != nil:
		err = fmt.Errorf("store members: %w", merr)
	case len(members) > 0:
		err = membersHealthy(members)
	default:
		err = s.cfg.Healthy(ctx)
	}
	if err != nil {
		writeJSON(w, http.StatusServiceUnavailable, fail(err.Error()))
		return
	}
	writeJSON(w, http.StatusOK, ok)
}

type resignJSON struct {
	Resigned bool `json:"resigned"`
}

func (s *Server) handleResign(w http.ResponseWriter, r *http.Request) {
	if s.cfg.Resign == nil {
		writeError(w, http.StatusNotImplemented, "resign is not supported by this copy")
		return
	}
	if !s.authorized(r) {
		s.log.Warn("resign refused", "remote", r.RemoteAddr)
		msg := "resign is allowed from loopback or with the admin bearer token"
		if s.cfg.RequireToken {
			msg = "resign needs the admin bearer token"
		}
		writeError(w, http.StatusForbidden, msg)
		return
	}
	if q := r.URL.Query(); q.Has("to") {
		s.handleResignTo(w, r, q.Get("to"))
		return
	}
	if !s.cfg.Leading() {
		writeError(w, http.StatusConflict, "this copy does not lead")
		return
	}
	s.log.Info("resign requested", "remote", r.RemoteAddr)
	ctx, cancel := context.WithTimeout(r.Context(), s.resignTimeout)
	defer cancel()
	if err := s.cfg.Resign(ctx); err != nil {
		s.log.Warn("resign failed", "remote", r.RemoteAddr, "err", err)
		writeError(w, http.StatusInternalServerError, "resign: "+err.Error())
		return
	}
	writeJSON(w, http.StatusOK, resignJSON{Resigned: true})
}

// authorized admits the TCP peer when it is a loopback address (unless
// RequireToken), or any peer presenting the admin token. Headers such as
// X-Forwarded-For are ignored: they are written by the client.
func (s *Server) authorized(r *http.Request) bool {
	if !s.cfg.RequireToken && isLoopback(r.RemoteAddr) {
		return true
	}
	if s.cfg.AdminToken == "" {
		return false
	}
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return false
	}
	// Compare digests so that the time taken reveals neither the token's
	// content nor its length.
	got := sha256.Sum256([]byte(strings.TrimSpace(token)))
	want := sha256.Sum256([]byte(s.cfg.AdminToken))
	return subtle.ConstantTimeCompare(got[:], want[:]) == 1
}

func isLoopback(remoteAddr string) bool {
	host, _, err := net.SplitHostPort(remoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	return ip.Unmap().IsLoopback()
}

type errorJSON struct {
	Error string `json:"error"`
}

func writeError(w http.ResponseWriter, code int, msg string) {
	writeJSON(w, code, errorJSON{Error: msg})
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // only plain structs are written; cannot happen
		http.Error(w, "encode response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/json")
	h.Set("Cache-Control", "no-store")
	h.Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(code)
	if code == http.StatusNoContent || code == http.StatusNotModified {
		return // statuses that carry no body (ready codes are configurable)
	}
	w.Write(append(b, '\n'))
}
