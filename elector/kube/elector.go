package kube

import (
	"context"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/life"
	"github.com/electd/electd/internal/backoff"
)

var _ elector.Locker = (*Elector)(nil)

// Elector is one candidate in one election on a Kubernetes Lease. Create
// it with New; it is safe for concurrent use.
type Elector struct {
	cfg  Config
	name string // the Lease's (LeaseName)
	log  *slog.Logger
	inst elector.Instrument
	life *life.Life
	ctx  context.Context // life's: cancelled by Close

	view    *view
	hub     *elector.Hub
	wakeups atomic.Uint64
	fails   *elector.StoreLog // retried store failures, rate-limited
	// seen is the highest fencing token this Elector has seen, its own or
	// another's: a new token is above it even if the Lease was deleted.
	seen atomic.Uint64
}

// New validates cfg and returns an Elector. It does not contact the API
// server.
func New(cfg Config) (*Elector, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	e := &Elector{
		cfg:  cfg,
		name: LeaseName(cfg.Election),
		log:  cfg.Logger.WithGroup("kube").With("election", cfg.Election, "id", cfg.ID, "namespace", cfg.Namespace, "lease", LeaseName(cfg.Election)),
		inst: cfg.Instrument,
		life: life.New(),
		hub:  elector.NewHub(),
	}
	e.ctx = e.life.Context()
	e.fails = elector.NewStoreLog(cfg.Clock, e.log, cfg.Instrument).ClassifyWith(errorClass)
	e.view = newView(e)
	return e, nil
}

func (e *Elector) leases() LeaseClient { return e.cfg.Leases.Leases(e.cfg.Namespace) }

// Wakeups counts how often a waiting campaign found itself first in line
// after a change of the Lease or of the line, and so re-checked whether it
// may lead (the other waiters make no request on a change).
func (e *Elector) Wakeups() uint64 { return e.wakeups.Load() }

// Close ends any term (ErrClosed) and hands the Lease over, leaves the
// line (best effort, bounded by a short timeout), and stops every
// goroutine the Elector started. It is safe to call more than once.
func (e *Elector) Close() error {
	if e.life.Close(e.hub.Close, nil) {
		e.log.Debug("closed")
	}
	return nil
}

// sawToken raises the highest token seen to tok.
func (e *Elector) sawToken(tok uint64) {
	for {
		cur := e.seen.Load()
		if tok <= cur || e.seen.CompareAndSwap(cur, tok) {
			return
		}
	}
}

// request bounds one API request: a reply later than one renewal interval
// is late, the next renewal is due.
func (e *Elector) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.callTimeout())
}

func (e *Elector) callTimeout() time.Duration {
	return max(e.cfg.Timing.RenewInterval, 100*time.Millisecond)
}

// cleanupTimeout bounds leaving after a campaign or term ended
// (Timing.CleanupTimeout).
func (e *Elector) cleanupTimeout() time.Duration { return e.cfg.Timing.CleanupTimeout() }

// sleep waits d on the configured clock; false if ctx ended first.
func (e *Elector) sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, e.cfg.Clock, d) == nil
}

// newBackoff is the backoff of a waiter's requests (Timing.WaitBackoff).
func (e *Elector) newBackoff() *backoff.Backoff { return e.cfg.Timing.WaitBackoff() }

// renewBackoff is the backoff of a leader's renewals (Timing.RenewBackoff).
func (e *Elector) renewBackoff() *backoff.Backoff { return e.cfg.Timing.RenewBackoff() }
