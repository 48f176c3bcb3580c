package store

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"

	"github.com/electd/electd/elector"
)

// failingConn is a backend connection whose electors report one store
// error, which carries the password, to their Instrument.
type failingConn struct{ err error }

func (c failingConn) NewElector(cand elector.Candidate) (elector.Locker, error) {
	elector.OrNop(cand.Instrument).StoreError("renew", c.err)
	return nil, nil
}
func (failingConn) Ping(context.Context) error { return nil }
func (failingConn) Close() error               { return nil }

// recorder is an Instrument that keeps the errors it is given.
type recorder struct {
	elector.NopInstrument
	mu   sync.Mutex
	errs []error
}

func (r *recorder) StoreError(_ string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, err)
}
func (r *recorder) StoreAnswered(string) {}

// TestStoreErrorsScrubbed: the store errors that electors report to their
// Instrument (which /healthz and the metrics show) pass through the
// password scrubber, and keep their chain.
func TestStoreErrorsScrubbed(t *testing.T) {
	const password = "hunter2-secret-pw"
	cause := errors.New("connection reset")
	s := &Store{url: &storeURL{secrets: newSecrets(password)},
		conn: failingConn{err: errors.Join(errors.New("dial redis://app:"+password+"@h:6379"), cause)}}
	var rec recorder
	if _, err := s.NewElector(elector.Candidate{Election: "e", ID: "a", Instrument: &rec}); err != nil {
		t.Fatal(err)
	}
	if len(rec.errs) != 1 {
		t.Fatalf("the instrument got %d errors, want 1", len(rec.errs))
	}
	got := rec.errs[0]
	if strings.Contains(got.Error(), password) {
		t.Fatalf("the instrument got the password: %q", got)
	}
	if !errors.Is(got, cause) {
		t.Fatalf("the scrubbed error lost its chain: %v", got)
	}
}
