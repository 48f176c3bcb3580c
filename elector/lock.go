package elector

import (
	"context"
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

// Slotted is implemented by backends that can run an election as a
// semaphore: up to n candidates hold a term at once, in arrival order, each
// with its own strictly growing token. n is 1 unless set; set it before the
// first Campaign. Every candidate of an election must use the same n; a
// candidate that finds others queued with another n gets a *SlotsError.
type Slotted interface {
	SetSlots(n int) error
	Slots() int
}

// TryCampaigner is implemented by backends that can try once: join the
// queue and, unless this candidate holds at once (it is first, or among the
// first Slots), leave again and return ErrBusy. It waits only for what the
// store itself imposes on a free election (Redis grants no term until one
// TTL after its state began), never for another candidate.
type TryCampaigner interface {
	TryCampaign(ctx context.Context) (*Term, error)
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

// RunRecorder is implemented by backends that can keep a once-per-period
// record for an election, beside (not inside) its queue.
type RunRecorder interface {
	// RecordRun stores r; the store drops it after period.
	RecordRun(ctx context.Context, r RunRecord, period time.Duration) error
	// LastRun returns the live record, or ErrNoRun.
	LastRun(ctx context.Context) (RunRecord, error)
}
