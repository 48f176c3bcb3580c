package lockrun

import (
	"context"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// RunForgetter is what `electd lock --forget` needs of the elector of a
// lock: its run record, read and cleared, and who holds the lock now.
// Every backend's elector has it (electortest's RunRecordForget checks).
type RunForgetter interface {
	LastRun(ctx context.Context) (elector.RunRecord, error)
	// ForgetRun deletes the run record, if any; nothing else.
	ForgetRun(ctx context.Context) error
	Leader(ctx context.Context) (elector.Leader, error)
}

// Forget is one `electd lock --forget NAME`: it clears the --once-per run
// record of the lock NAME, and only that. A holder of the lock keeps it:
// clearing the record cannot make two runs overlap, and a holder's run that
// succeeds records itself again.
type Forget struct {
	Name  string
	Yes   bool // --yes: without it, say what would be cleared and clear nothing
	El    elector.Elector
	Store *store.Store
	Out   io.Writer // what was cleared, or that nothing was (stdout)
}

// UnconfirmedError: --forget without --yes found a record and cleared
// nothing (electd exits 2).
type UnconfirmedError struct {
	Name   string
	Record elector.RunRecord
}

func (e *UnconfirmedError) Error() string {
	return fmt.Sprintf("lock %s: --forget would clear %s; nothing cleared: add --yes to clear it", e.Name, describeRun(e.Record))
}

// describeRun says what a run record holds: who ran, when, and when it lapses.
func describeRun(r elector.RunRecord) string {
	return fmt.Sprintf("the run record of %s (token %d), finished %s, lapsing %s",
		r.ID, r.Token, r.Finished.UTC().Format(time.RFC3339), r.Expires.UTC().Format(time.RFC3339))
}

// Run clears the record. It returns nil when it cleared one or there was
// none (and says which on Out), an *UnconfirmedError without Yes, a
// *store.UnreachableError when the store does not answer before ctx ends
// (or, for a quorum, a majority does not), and the store's error when it
// refuses.
func (f *Forget) Run(ctx context.Context) error {
	rf, ok := f.El.(RunForgetter)
	if !ok {
		return fmt.Errorf("lock %s: the store %s cannot clear run records", f.Name, f.Store.Redacted())
	}
	r, err := rf.LastRun(ctx)
	switch {
	case errors.Is(err, elector.ErrNoRun):
		fmt.Fprintf(f.Out, "lock %s: no run on record; nothing to clear%s\n", f.Name, f.held(ctx, rf))
		return nil
	case err != nil:
		return f.storeErr("read the run record", err)
	case !f.Yes:
		return &UnconfirmedError{Name: f.Name, Record: r}
	}
	if err := rf.ForgetRun(ctx); err != nil {
		return f.storeErr("clear the run record", err)
	}
	fmt.Fprintf(f.Out, "lock %s: cleared %s; the next run runs%s\n", f.Name, describeRun(r), f.held(ctx, rf))
	return nil
}

// held says, after "the next run runs", who holds the lock now, if anyone:
// the lock is not touched, and a run under it that succeeds records again.
func (f *Forget) held(ctx context.Context, rf RunForgetter) string {
	ctx, cancel := context.WithTimeout(ctx, probeTimeout)
	defer cancel()
	l, err := rf.Leader(ctx)
	if err != nil {
		return ""
	}
	return fmt.Sprintf("\nlock %s is held now by %s (token %d), untouched: if its run succeeds, it is recorded again", f.Name, l.ID, l.Token)
}

// storeErr is a store's error while doing what: a refusal as it is, any
// other (a timeout, a quorum not reached) as a *store.UnreachableError.
func (f *Forget) storeErr(what string, err error) error {
	var se *elector.StoreError
	if errors.As(err, &se) && se.Permanent {
		return fmt.Errorf("lock %s: %s: %w", f.Name, what, err)
	}
	// A ping names the cause (e.g. "connection refused") behind a timeout.
	pctx, cancel := context.WithTimeout(context.Background(), probeTimeout)
	defer cancel()
	if perr := f.Store.Ping(pctx); perr != nil {
		err = perr
	}
	return &store.UnreachableError{What: fmt.Sprintf("lock %s: --forget could not %s", f.Name, what), Store: f.Store.Redacted(), Err: err}
}
