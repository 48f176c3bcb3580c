package elector

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"
)

// MaxSlots bounds a semaphore's size: every waiter may watch up to Slots
// keys, so the number must stay small.
const MaxSlots = 1000

// ErrBusy is returned by TryCampaign when others hold the election (every
// slot of a semaphore): the candidate left the queue at once.
var ErrBusy = errors.New("held by another candidate")

// ErrNoRun is returned by LastRun when no live run record exists.
var ErrNoRun = errors.New("no run recorded")

// SlotsError refuses a candidate whose slot count differs from that of the
// candidates already queued: every holder of a semaphore must agree on N.
// Retrying cannot fix it; the campaign ends and leaves nothing behind.
type SlotsError struct {
	Election     string
	Mine, Theirs int
}

func (e *SlotsError) Error() string {
	return fmt.Sprintf("election %q: this candidate has %d slot(s) but the candidates already queued have %d: every holder must use the same --slots",
		e.Election, e.Mine, e.Theirs)
}

// ValidateSlots checks a slot count (1 is a plain election or lock).
func ValidateSlots(n int) error {
	if n < 1 || n > MaxSlots {
		return Configf("slots", "must be between 1 and %d, got %d", MaxSlots, n)
	}
	return nil
}

// RunRecord says who completed a once-per-period job, and when.
type RunRecord struct {
	ID       string    `json:"id"`
	Token    uint64    `json:"fencing_token"`
	Started  time.Time `json:"started"`
	Finished time.Time `json:"finished"`
	// Expires is when the record lapses, by the recording host's clock.
	Expires time.Time `json:"expires"`
}

// EncodeRun checks period and renders r as the backends store it (JSON).
func EncodeRun(r RunRecord, period time.Duration) ([]byte, error) {
	if period <= 0 {
		return nil, Configf("once-per", "must be positive, got %s", period)
	}
	b, err := json.Marshal(r)
	if err != nil {
		return nil, fmt.Errorf("encode run record: %w", err)
	}
	return b, nil
}

// DecodeRun reads a stored run record. A value that is not one (written by
// another tool) is a record all the same, by the ID of its text: its period
// has not lapsed.
func DecodeRun(b []byte) RunRecord {
	var r RunRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return RunRecord{ID: string(b)}
	}
	return r
}

// Locker is an Elector with the lock features `electd lock` uses. Every
// backend implements it (and asserts so at compile time); a semaphore is a
// Candidate with Slots > 1.
type Locker interface {
	Elector
	// TryCampaign tries once: it joins the queue and, unless this
	// candidate holds at once (it is first, or among the first Slots),
	// leaves again and returns ErrBusy. It waits only for what the store
	// itself imposes on a free election (Redis grants no term until one TTL
	// after its state began), never for another candidate.
	TryCampaign(ctx context.Context) (*Term, error)
	// RecordRun stores a once-per-period run record beside (not inside) the
	// election's queue; the store drops it after period.
	RecordRun(ctx context.Context, r RunRecord, period time.Duration) error
	// LastRun returns the live run record, or ErrNoRun.
	LastRun(ctx context.Context) (RunRecord, error)
	// Wakeups counts how often a waiting campaign was woken by the store to
	// re-check whether it leads: the conformance suite uses it to prove that
	// a leader's exit wakes only its successor (or, for a semaphore, few).
	Wakeups() uint64
}
