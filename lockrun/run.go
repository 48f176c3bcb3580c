package lockrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

// Config is what one `electd lock` asks for, checked by the caller.
type Config struct {
	Candidate   elector.Candidate // validated; its Election is the lock's NAME
	Wait        time.Duration     // < 0: forever; 0: try once
	Deadline    time.Time         // the end of Wait, counted from electd's start; zero: none
	OncePer     time.Duration     // 0: off
	StopTimeout time.Duration     // the supervisor's, for the log
}

// Lock is one `electd lock` on an open store.
type Lock struct {
	Config
	Log     *slog.Logger
	Store   *store.Store
	El      elector.Locker // made by Store for Candidate
	Sup     *supervisor.Supervisor
	Notices io.Writer // where a run on record is said (stderr), unless Log is above info
}

// Run takes the lock, runs the command under it and releases it. It
// returns the command's *supervisor.ExitError, a *BusyError or a
// *store.UnreachableError when the lock was not acquired, a *LostError
// when it was lost, nil when --once-per found the run on record, and a
// *StoppedError when ctx ended first (a signal).
func (l *Lock) Run(ctx context.Context) error {
	log, name := l.Log, l.Candidate.Election
	if l.OncePer > 0 {
		// A first look saves the wait; an unanswered one is not fatal: the
		// look after acquiring is the one that counts.
		wctx, cancel := WithDeadline(ctx, l.Deadline)
		done, err := l.alreadyDone(wctx)
		cancel()
		if done || ctx.Err() != nil {
			return stopped(ctx, nil, "")
		}
		if err != nil {
			log.Warn("cannot read the run record yet; will look again once the lock is held", "err", err)
		}
	}
	// The command's namespace init starts while we wait (not past --wait,
	// nor past a signal), so that the lock's start costs only the
	// command's fork and exec. (A Lock that is only to wait, as in
	// TestNotAcquired, has no Sup.)
	if l.Sup != nil {
		pctx, pcancel := WithDeadline(ctx, l.Deadline)
		l.Sup.PrepareChild(pctx)
		pcancel()
		defer l.Sup.ReleasePrepared()
	}
	log.Debug("waiting for the lock", "id", l.Candidate.ID, "store", l.Store.Redacted(), "wait", waitText(l.Wait),
		"slots", l.Candidate.Slots, "timing", l.Candidate.Timing.String(), "stop_timeout", l.StopTimeout)
	start := time.Now()
	term, err := l.acquire(ctx)
	if err != nil {
		if errors.Is(err, elector.ErrBusy) || errors.Is(err, errWaitExpired) {
			return l.notAcquired()
		}
		return stopped(ctx, err, "left the queue while waiting; nothing held")
	}
	log.Info("lock acquired", "token", term.Token, "waited", time.Since(start).Round(time.Millisecond),
		"valid_until", term.ValidUntil())

	if l.OncePer > 0 {
		// Another holder may have finished the job while we waited. If the
		// record cannot be read, do not risk a second run.
		if done, err := l.alreadyDone(ctx); done || err != nil {
			rctx, rcancel := context.WithTimeout(context.WithoutCancel(ctx), l.Candidate.Timing.RenewInterval+time.Second)
			defer rcancel()
			if rerr := term.Resign(rctx); rerr != nil {
				log.Warn("release failed; the lease will expire on the store", "err", rerr)
			}
			return stopped(ctx, err, "lock released")
		}
	}

	var recordErr error
	started := time.Now()
	err = l.Sup.RunOnce(ctx, term, func(ctx context.Context, st supervisor.ExitStatus) {
		if l.OncePer > 0 && st.ExitCode() == 0 {
			recordErr = l.recordRun(ctx, term, started)
		}
	})
	var (
		te *supervisor.TermEndedError
		ie *supervisor.InterruptedError
	)
	switch {
	case errors.As(err, &te):
		return &LostError{Name: name, Err: te}
	case errors.As(err, &ie):
		return stopped(ctx, err, fmt.Sprintf("command stopped (code %d), lock released", ie.Status.ExitCode()))
	case recordErr != nil:
		return fmt.Errorf("lock %s: the command succeeded but its run could not be recorded, so another copy may run it again within --once-per: %w", name, recordErr)
	}
	return err // an *ExitError with the command's code, or a start failure
}

// stopped returns err, and if ctx has ended (a signal), says what was done
// about it: while, e.g. "lock released".
func stopped(ctx context.Context, err error, while string) error {
	if ctx.Err() != nil {
		return &StoppedError{While: while, Err: err}
	}
	return err
}

// alreadyDone reports whether a successful run is on record within
// --once-per, and says so (unless the log level is above info).
func (l *Lock) alreadyDone(ctx context.Context) (bool, error) {
	rctx, cancel := context.WithTimeout(ctx, max(l.Candidate.Timing.RenewInterval, 2*time.Second))
	defer cancel()
	r, err := l.El.LastRun(rctx)
	switch {
	case errors.Is(err, elector.ErrNoRun):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("lock %s: read the run record: %w", l.Candidate.Election, err)
	}
	if l.Log.Enabled(ctx, slog.LevelInfo) {
		fmt.Fprintf(l.Notices, "electd: %s: already run by %s at %s (token %d); not running again before %s (--once-per)\n",
			l.Candidate.Election, r.ID, r.Finished.UTC().Format(time.RFC3339), r.Token, r.Expires.UTC().Format(time.RFC3339))
	}
	return true, nil
}

// recordRun records a successful run while the lock is still held, retrying
// transient store errors until the lease's deadline.
func (l *Lock) recordRun(ctx context.Context, term *elector.Term, started time.Time) error {
	now := time.Now()
	r := elector.RunRecord{ID: l.Candidate.ID, Token: term.Token, Started: started.UTC(), Finished: now.UTC(), Expires: now.Add(l.OncePer).UTC()}
	ctx, cancel := context.WithDeadline(context.WithoutCancel(ctx), term.ValidUntil())
	defer cancel()
	backoff := 50 * time.Millisecond
	for {
		cctx, ccancel := context.WithTimeout(ctx, max(l.Candidate.Timing.RenewInterval, time.Second))
		err := l.El.RecordRun(cctx, r, l.OncePer)
		ccancel()
		if err == nil {
			l.Log.Info("run recorded", "token", r.Token, "until", r.Expires)
			return nil
		}
		var se *elector.StoreError
		if !errors.As(err, &se) || se.Permanent {
			return err
		}
		l.Log.Warn("recording the run failed; retrying", "err", err)
		select {
		case <-time.After(backoff):
		case <-ctx.Done():
			return err
		}
		backoff = min(2*backoff, time.Second)
	}
}
