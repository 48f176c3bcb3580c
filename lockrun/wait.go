package lockrun

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// errWaitExpired is the cause of the --wait context's end.
var errWaitExpired = errors.New("wait expired")

// Bounds on what follows the end of --wait, so that a store that does not
// answer cannot stretch the wait much: the campaign's own clean-up (leaving
// the queue, retried while the store is down) and the look at who holds the
// lock and whether the store answers.
const (
	campaignGrace = 500 * time.Millisecond
	probeTimeout  = time.Second

	// MaxOverrun is the most that Run's wait goes past Config.Deadline.
	MaxOverrun = campaignGrace + probeTimeout
)

// WithDeadline is ctx ended at deadline (the end of --wait), or ctx itself
// for a zero deadline. The caller opens the store under it, so that --wait
// bounds the opening too.
func WithDeadline(ctx context.Context, deadline time.Time) (context.Context, context.CancelFunc) {
	if deadline.IsZero() {
		return ctx, func() {}
	}
	return context.WithDeadlineCause(ctx, deadline, errWaitExpired)
}

// CloseAfter runs done (closing the elector and the store) once Run has
// returned err. After a *store.UnreachableError nothing is held and the
// store does not answer: closing would only retry leaving the queue (an
// entry left behind expires after one TTL), past --wait, so CloseAfter
// waits for done at most campaignGrace and leaves it running.
func CloseAfter(err error, done func(), log *slog.Logger) {
	var ue *store.UnreachableError
	if !errors.As(err, &ue) {
		done()
		return
	}
	closed := make(chan struct{})
	go func() { done(); close(closed) }()
	select {
	case <-closed:
	case <-time.After(campaignGrace):
		log.Debug("not waiting for the store to confirm that this copy left the queue; its entry expires after one ttl")
	}
}

// acquire takes the lock: TryCampaign for --wait 0, else Campaign bounded
// by --wait (if not forever).
func (l *Lock) acquire(ctx context.Context) (*elector.Term, error) {
	if l.Wait == 0 {
		// A free Redis election may take one TTL (see Locker.TryCampaign); an
		// unreachable store must not keep a try waiting for ever.
		t := l.Candidate.Timing
		tctx, cancel := context.WithTimeoutCause(ctx, t.TTL+2*t.RenewInterval+time.Second, errWaitExpired)
		defer cancel()
		term, err := l.El.TryCampaign(tctx)
		if err != nil && errors.Is(context.Cause(tctx), errWaitExpired) {
			return nil, errWaitExpired
		}
		return term, err
	}
	ctx, cancel := WithDeadline(ctx, l.Deadline)
	defer cancel()
	type result struct {
		term *elector.Term
		err  error
	}
	ch := make(chan result, 1)
	go func() {
		term, err := l.El.Campaign(ctx)
		ch <- result{term, err}
	}()
	var r result
	select {
	case r = <-ch:
	case <-ctx.Done():
		if !errors.Is(context.Cause(ctx), errWaitExpired) {
			r = <-ch // a signal: the campaign leaves the queue, as it says
			break
		}
		// The campaign leaves the queue before it returns, retrying while
		// the store does not answer. Past --wait that is not worth waiting
		// for: an entry left behind expires after one TTL, and a term won
		// at the last moment is resigned (or lapses) without electd.
		select {
		case r = <-ch:
		case <-time.After(campaignGrace):
			go func() {
				if r := <-ch; r.term != nil {
					rctx, rcancel := context.WithTimeout(context.Background(), probeTimeout)
					_ = r.term.Resign(rctx)
					rcancel()
				}
			}()
			return nil, errWaitExpired
		}
	}
	if r.err != nil && errors.Is(context.Cause(ctx), errWaitExpired) {
		return nil, errWaitExpired
	}
	return r.term, r.err
}

// notAcquired says why the lock was not acquired: held by another (a
// *BusyError), or a store that does not answer (a *store.UnreachableError).
// It asks the store who holds the lock and pings it at once, for at most
// probeTimeout; a failed ping ends the question (the backends retry it
// until its context ends).
func (l *Lock) notAcquired() error {
	ctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	pinged := make(chan error, 1)
	go func() {
		err := l.Store.Ping(ctx)
		if err != nil {
			cancel()
		}
		pinged <- err
	}()
	holder := holderOf(ctx, l.El)
	pingErr := <-pinged
	if holder == "" && pingErr != nil {
		return &store.UnreachableError{What: "lock " + l.Candidate.Election + ": not acquired " + waitPhrase(l.Wait),
			Store: l.Store.Redacted(), Err: pingErr}
	}
	return &BusyError{Name: l.Candidate.Election, Wait: l.Wait, Slots: l.Candidate.Slots, Holder: holder}
}

// holderOf names who holds the lock, for the "not acquired" message; empty
// when the store does not say before ctx ends.
func holderOf(ctx context.Context, el elector.Elector) string {
	l, err := el.Leader(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("%s (token %d)", l.ID, l.Token)
}
