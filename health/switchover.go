package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"strings"

	"github.com/electd/electd/elector"
)

// SwitchoverDoc is the body of POST /resign?to=ID: on success Resigned and
// HandedTo; on a refusal Error and Reason (one of the Reason* constants),
// and, when this copy does not lead, the Leader it knows of (null if none).
type SwitchoverDoc struct {
	Resigned bool        `json:"resigned"`
	HandedTo string      `json:"handed_to,omitempty"`
	Error    string      `json:"error,omitempty"`
	Reason   string      `json:"reason,omitempty"`
	Leader   *leaderJSON `json:"leader,omitempty"`
}

// Why a switchover was refused (SwitchoverDoc.Reason).
const (
	ReasonNotLeader   = "not_leader"  // 409: this copy does not lead; Leader names who does
	ReasonNotQueued   = "not_queued"  // 409: the named candidate waits in no queue of the election
	ReasonSelf        = "self"        // 409: the named candidate already leads
	ReasonUnsupported = "unsupported" // 501: the store's backend cannot hand a term to a named candidate
	ReasonFailed      = "failed"      // 500: the store failed
)

// handleResignTo answers POST /resign?to=ID, after handleResign's checks of
// the peer: the leader stops its child, then hands the term to ID.
func (s *Server) handleResignTo(w http.ResponseWriter, r *http.Request, to string) {
	if s.cfg.ResignTo == nil {
		writeJSON(w, http.StatusNotImplemented, SwitchoverDoc{Error: "switchover is not supported by this copy", Reason: ReasonUnsupported})
		return
	}
	if to == "" {
		writeError(w, http.StatusBadRequest, "?to= needs the --id of a queued candidate")
		return
	}
	if !s.cfg.Leading() {
		s.notLeader(w)
		return
	}
	s.log.Info("switchover requested", "remote", r.RemoteAddr, "to", to)
	ctx, cancel := context.WithTimeout(r.Context(), s.resignTimeout)
	defer cancel()
	err := s.cfg.ResignTo(ctx, to)
	if err == nil {
		writeJSON(w, http.StatusOK, SwitchoverDoc{Resigned: true, HandedTo: to})
		return
	}
	s.log.Warn("switchover refused or failed", "remote", r.RemoteAddr, "to", to, "err", err)
	doc := SwitchoverDoc{Error: err.Error(), Resigned: !s.cfg.Leading()}
	code := http.StatusConflict
	switch {
	case errors.Is(err, elector.ErrNotLeading):
		s.notLeader(w)
		return
	case errors.As(err, new(*elector.NotQueuedError)):
		doc.Reason = ReasonNotQueued
	case errors.Is(err, elector.ErrSwitchoverToSelf):
		doc.Reason = ReasonSelf
	case errors.Is(err, elector.ErrNoSwitchover):
		code, doc.Reason = http.StatusNotImplemented, ReasonUnsupported
	default:
		code, doc.Reason = http.StatusInternalServerError, ReasonFailed
	}
	writeJSON(w, code, doc)
}

// notLeader answers 409 naming the leader this copy knows of.
func (s *Server) notLeader(w http.ResponseWriter) {
	d := s.doc(s.cfg.View.Current())
	msg := "this copy does not lead and no leader is known"
	if d.Leader != nil {
		msg = fmt.Sprintf("this copy does not lead; %s leads (address %q): hand over from there", d.Leader.ID, d.Leader.Address)
	}
	writeJSON(w, http.StatusConflict, SwitchoverDoc{Error: msg, Reason: ReasonNotLeader, Leader: d.Leader})
}

// SwitchoverError is a switchover that the copy at URL refused or failed:
// Code is the HTTP status and Doc its answer.
type SwitchoverError struct {
	URL  string
	Code int
	Doc  SwitchoverDoc
}

func (e *SwitchoverError) Error() string {
	msg := e.Doc.Error
	if msg == "" {
		msg = http.StatusText(e.Code)
	}
	if l := e.Doc.Leader; e.Doc.Reason == ReasonNotLeader && l != nil {
		where := "it advertises no address"
		if l.Address != "" {
			where = "it advertises " + l.Address
		}
		msg = fmt.Sprintf("%s does not lead; %s leads (%s): run the switchover with --url set to that copy's --listen address", e.URL, l.ID, where)
	}
	return fmt.Sprintf("switchover refused (%d %s): %s", e.Code, e.Doc.Reason, msg)
}

// RequestSwitchover asks the electd listening at base (its --listen URL) to
// hand its term to candidate to, with the admin bearer token if not empty
// (POST /resign?to=ID). It returns nil once the term was handed over, a
// *SwitchoverError when the copy refused, or the request's error.
func RequestSwitchover(ctx context.Context, hc *http.Client, base, token, to string) error {
	u, err := url.Parse(strings.TrimRight(base, "/") + "/resign")
	if err != nil || u.Host == "" || (u.Scheme != "http" && u.Scheme != "https") {
		return elector.Configf("url", "%q is not an http(s)://host:port URL of an electd's --listen address", base)
	}
	u.RawQuery = url.Values{"to": {to}}.Encode()
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, u.String(), nil)
	if err != nil {
		return fmt.Errorf("switchover: %w", err)
	}
	if token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return fmt.Errorf("switchover: %w", err)
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, 64<<10))
	if err != nil {
		return fmt.Errorf("switchover: read the answer: %w", err)
	}
	var doc SwitchoverDoc
	if err := json.Unmarshal(body, &doc); err != nil {
		doc.Error = strings.TrimSpace(string(body))
	}
	if resp.StatusCode == http.StatusOK && doc.Resigned {
		return nil
	}
	return &SwitchoverError{URL: base, Code: resp.StatusCode, Doc: doc}
}
