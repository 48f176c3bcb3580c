package status

import (
	"context"
	"errors"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// Source is the candidate a reading goes through: it never campaigns.
type Source interface {
	elector.Queuer
	LastRun(ctx context.Context) (elector.RunRecord, error)
}

// Report is one reading of an election.
type Report struct {
	Election string    `json:"election"`
	At       time.Time `json:"at"` // when it was read, by this host's clock
	Store    Store     `json:"store"`
	// Slots is how many may hold at once (1: a plain election).
	Slots int `json:"slots"`
	// Queue is every candidate in arrival order, holders flagged; null
	// when the store could not be read.
	Queue []elector.Queued `json:"queue"`
	// Holders are the candidates of Queue that hold a term, each with its
	// age; empty when nobody holds.
	Holders []Held `json:"holders"`
	// Agreement says what a quorum's reading rests on (redlock://).
	Agreement string `json:"agreement,omitempty"`
	// LastRun is the live --once-per run record; null when there is none.
	LastRun *Run `json:"last_run"`
}

// Store is the store's health, as far as the reading saw it.
type Store struct {
	URL       string `json:"url"` // redacted
	Reachable bool   `json:"reachable"`
	// Error says why the reading failed: the store did not answer
	// (Reachable false), or it refused (credentials, permissions).
	Error string `json:"error,omitempty"`
}

// Held is one holder's term.
type Held struct {
	ID           string    `json:"id"`
	Address      string    `json:"address,omitempty"`
	FencingToken uint64    `json:"fencing_token"`
	Since        time.Time `json:"since,omitzero"`
	// AgeSeconds is how long the term has lasted (0 when Since is unknown).
	AgeSeconds float64 `json:"age_seconds"`
}

// Run is the --once-per record, and how long it has left.
type Run struct {
	elector.RunRecord
	// ExpiresInSeconds is how long until Expires, by this host's clock.
	ExpiresInSeconds float64 `json:"expires_in_seconds"`
}

// Reader reads reports of one election.
type Reader struct {
	Election string
	Source   Source
	StoreURL string                          // redacted, for the report and errors
	Ping     func(ctx context.Context) error // one cheap request to the store
	Now      func() time.Time                // nil: time.Now
}

// Read takes one reading. The report is filled as far as the store
// answered; the error is a *store.UnreachableError when the store did not
// answer (its ping, or a read that failed other than for good), and the
// failure otherwise.
func (r Reader) Read(ctx context.Context) (Report, error) {
	now := time.Now
	if r.Now != nil {
		now = r.Now
	}
	rep := Report{Election: r.Election, Store: Store{URL: r.StoreURL, Reachable: true}, Slots: 1}
	unreachable := func(err error) (Report, error) {
		rep.Store.Reachable, rep.Store.Error = false, err.Error()
		rep.At = now()
		return rep, &store.UnreachableError{What: "status " + r.Election, Store: r.StoreURL, Err: err}
	}
	if err := r.Ping(ctx); err != nil {
		return unreachable(err)
	}
	refused := func(err error) (Report, error) {
		rep.Store.Error, rep.At = err.Error(), now()
		return rep, err
	}
	q, err := r.Source.Queue(ctx)
	if err != nil {
		if permanent(err) {
			return refused(err)
		}
		return unreachable(err)
	}
	run, err := r.Source.LastRun(ctx)
	switch {
	case errors.Is(err, elector.ErrNoRun):
	case err != nil && permanent(err):
		return refused(err)
	case err != nil:
		return unreachable(err)
	}
	rep.At = now()
	rep.Slots, rep.Queue, rep.Agreement = q.Slots, q.Candidates, q.Agreement
	if rep.Queue == nil {
		rep.Queue = []elector.Queued{}
	}
	rep.Holders = []Held{}
	for _, c := range q.Holders() {
		h := Held{ID: c.ID, Address: c.Address, FencingToken: c.Token, Since: c.Since}
		if !c.Since.IsZero() {
			h.AgeSeconds = max(rep.At.Sub(c.Since), 0).Seconds()
		}
		rep.Holders = append(rep.Holders, h)
	}
	if err == nil {
		rep.LastRun = &Run{RunRecord: run, ExpiresInSeconds: max(run.Expires.Sub(rep.At), 0).Seconds()}
	}
	return rep, nil
}

// permanent reports whether err is a store's refusal that retrying cannot
// fix (credentials, permissions, a bad reply), not an outage.
func permanent(err error) bool {
	var se *elector.StoreError
	return errors.As(err, &se) && se.Permanent
}
