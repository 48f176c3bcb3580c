package rediscore

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/electd/electd/elector"
)

// The steps of a candidacy and a term that both backends take alike: the
// waits between steps, the start of a term, the bounds of a resignation
// and of a cleanup.

// Wait sleeps d, or until l (may be nil) is woken or done (may be nil) is
// closed; a wake-up by message, or by the timer when it stands for the
// queue (woken), counts in Wakeups. It returns false if ctx ended or done
// was closed.
func (c *Core) Wait(ctx context.Context, l *Listener, d time.Duration, woken bool, done <-chan struct{}) bool {
	var wake chan Cause
	if l != nil {
		wake = l.C
	}
	t := c.cand.Clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		if woken {
			c.Woke()
		}
	case why := <-wake:
		if why == ByMessage {
			c.Woke()
		}
	case <-done:
		return false
	case <-ctx.Done():
		return false
	}
	return true
}

// Pause waits, in a term's renewal loop, until next, a wake-up of l, the
// end of dl, or Close (which ends dl with ErrClosed); it reports whether
// l was woken.
func (c *Core) Pause(dl *elector.Deadline, l *Listener, next time.Time) (woken bool) {
	t := c.cand.Clock.NewTimer(max(next.Sub(c.cand.Clock.Now()), 0))
	defer t.Stop()
	select {
	case <-t.C():
	case <-l.C:
		return true
	case <-dl.Done():
	case <-c.Ctx.Done():
		dl.End(elector.ErrClosed)
	}
	return false
}

// Lead starts term, granted to entry with token after a campaign that
// began at start: keep renews it (Life.Lead). If the Elector closed
// meanwhile, the term ends at once and cleanup removes the entry.
func (c *Core) Lead(term *elector.Term, dl *elector.Deadline, entry string, token uint64, start time.Time, keep, cleanup func()) (*elector.Term, error) {
	if !c.Life.Lead(dl, keep) {
		dl.End(elector.ErrClosed)
		cleanup()
		return nil, elector.ErrClosed
	}
	c.log.Info("leadership acquired", "entry", entry, "token", token,
		"waited", c.cand.Clock.Now().Sub(start).Round(time.Millisecond), "valid_until", dl.ValidUntil())
	return term, nil
}

// Ended logs the end of a term (its deadline's error, returned).
func Ended(log *slog.Logger, dl *elector.Deadline) error {
	err := dl.Err()
	log.Info("leadership ended", "reason", elector.LossReason(err), "err", err)
	return err
}

// Resigning bounds a resignation under ctx by one TTL if ctx has no
// deadline of its own.
func (c *Core) Resigning(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.cand.Timing.TTL)
}

// Cleanup removes entry through leave after a term or campaign ended,
// within CleanupTimeout and independently of any context that has ended;
// a failure is logged (failed) at debug level: the entry expires.
func (c *Core) Cleanup(entry string, leave func(context.Context) error, failed string) {
	ctx, cancel := context.WithTimeout(context.Background(), c.CleanupTimeout())
	defer cancel()
	if err := leave(ctx); err != nil {
		c.log.Debug(failed, "entry", entry, "err", err)
		return
	}
	c.log.Debug("candidate removed", "entry", entry)
}

// CampaignEnded is the error of a campaign of backend name whose ctx
// ended, naming the last error (labelled label) it retried, if any.
func CampaignEnded(ctx context.Context, name, label string, lastErr error) error {
	if lastErr != nil {
		return fmt.Errorf("%s campaign: %w (%s: %v)", name, ctx.Err(), label, lastErr)
	}
	return fmt.Errorf("%s campaign: %w", name, ctx.Err())
}
