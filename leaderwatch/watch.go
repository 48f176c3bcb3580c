package leaderwatch

import (
	"context"
	"fmt"
	"io"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/health"
	"github.com/electd/electd/store"
)

// Watch is one `electd leader --watch`.
type Watch struct {
	Leaders <-chan elector.Leader      // every leader change (elector.Elector's Observe)
	Reach   *Reachability              // the candidate's Instrument, and Probe's
	GiveUp  time.Duration              // > 0: end an outage that lasts this long; 0: never
	Store   string                     // the store URL, redacted, for the notices
	Show    func(elector.Leader) error // prints a term (or "no leader")
	Notices io.Writer                  // stderr: the store stops answering, answers again
}

// Run shows each new term of Leaders until it closes or ctx ends. While
// the store does not answer, the leader is unknown: a "no leader" then is
// not shown, and Notices says the store cannot be reached, and again when
// it answers. An outage that lasts GiveUp, or a watch that ends during
// one, returns a *store.UnreachableError.
func (w Watch) Run(ctx context.Context) error {
	var (
		terms   health.Terms
		pending *elector.Leader // "no leader" held back during an outage
		down    error           // the outage's last error; nil: the store answers
		timer   <-chan time.Time
	)
	show := func(l elector.Leader) error {
		if l, ok := terms.Next(l); ok {
			if err := w.Show(l); err != nil {
				return fmt.Errorf("write: %w", err)
			}
		}
		return nil
	}
	for {
		select {
		case l, ok := <-w.Leaders:
			if !ok {
				if err := w.Reach.Err(); err != nil && ctx.Err() == nil {
					return &store.UnreachableError{What: "leader --watch: the watch ended", Store: w.Store, Err: err}
				}
				return nil
			}
			if l.IsZero() && w.Reach.Err() != nil {
				pending = &l // unknown, not "none": shown if the store says so once it answers
				continue
			}
			pending = nil
			if err := show(l); err != nil {
				return err
			}
		case <-w.Reach.changed:
			switch err := w.Reach.Err(); {
			case err != nil && down == nil:
				down = err
				fmt.Fprintf(w.Notices, "electd: the store %s cannot be reached: %v; the leader is unknown, still watching\n", w.Store, err)
				if w.GiveUp > 0 {
					timer = time.After(w.GiveUp)
				}
			case err == nil && down != nil:
				down, timer = nil, nil
				fmt.Fprintf(w.Notices, "electd: the store %s answers again\n", w.Store)
				if pending != nil {
					if err := show(*pending); err != nil {
						return err
					}
					pending = nil
				}
			case err != nil:
				down = err
			}
		case <-timer:
			return &store.UnreachableError{What: fmt.Sprintf("leader --watch: gave up after --timeout %s", w.GiveUp),
				Store: w.Store, Err: down}
		case <-ctx.Done():
			return nil
		}
	}
}
