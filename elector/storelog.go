package elector

import (
	"log/slog"
	"sync"
	"time"

	"github.com/electd/electd/clock"
)

// StoreLogInterval is the least time between two warnings about the same
// failing kind of store request: long enough that an outage of minutes
// gives a handful of lines, short enough that a log tail shows it still
// fails.
const StoreLogInterval = 30 * time.Second

// StoreLog reports a failing store the same way for every backend, rate
// limited per kind of request (op, e.g. "renew", "campaign", "watch"):
//
//   - the first failure is a warning at once ("store request failed;
//     retrying");
//   - while it keeps failing, at most one warning per StoreLogInterval
//     ("store request still failing; retrying") gives the failures since
//     the outage began ("failures", "for") and those left out since the
//     previous warning ("suppressed"); each one left out is logged at debug
//     level;
//   - the first success after a reported outage is logged ("store answers
//     again") with the number of failures and how long the outage lasted.
//
// A request that fails and succeeds in turn (flapping) still gets at most
// one warning per interval: an outage that begins within the interval of
// the last warning is announced only once that interval has passed (if it
// still fails), and its end only if it was announced. Counting errors for
// metrics stays with Instrument.
//
// It is safe for concurrent use.
type StoreLog struct {
	clk clock.Clock
	log *slog.Logger

	mu  sync.Mutex
	ops map[string]*outage
}

// outage is the state of one op.
type outage struct {
	failing    bool
	since      time.Time // first failure of the current outage
	failures   int       // in the current outage
	reported   bool      // a line announced the current outage
	warned     time.Time // last warning; zero: none yet
	suppressed int       // failures not warned about since then
}

// NewStoreLog reports on log, timing intervals with clk (clock.Real if nil).
func NewStoreLog(clk clock.Clock, log *slog.Logger) *StoreLog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &StoreLog{clk: clock.OrReal(clk), log: log, ops: map[string]*outage{}}
}

// Failed records a failed store request of kind op that will be retried.
// attrs are added to the line (key-value pairs, as for slog).
func (l *StoreLog) Failed(op string, err error, attrs ...any) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	o := l.ops[op]
	if o == nil {
		o = &outage{}
		l.ops[op] = o
	}
	if !o.failing {
		o.failing, o.since, o.failures, o.reported = true, now, 0, false
	}
	o.failures++
	args := append([]any{"op", op, "err", err}, attrs...)
	if !o.warned.IsZero() && now.Sub(o.warned) < StoreLogInterval {
		o.suppressed++
		l.log.Debug("store request failed again; retrying", args...)
		return
	}
	msg := "store request failed; retrying"
	if o.reported {
		msg = "store request still failing; retrying"
	}
	if o.failures > 1 {
		args = append(args, "failures", o.failures, "for", now.Sub(o.since).Round(time.Millisecond))
	}
	if o.suppressed > 0 {
		args = append(args, "suppressed", o.suppressed)
	}
	l.log.Warn(msg, args...)
	o.reported, o.warned, o.suppressed = true, now, 0
}

// Answered records a successful store request of kind op: after a reported
// outage it logs the recovery. It is cheap when op was not failing.
func (l *StoreLog) Answered(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.ops[op]
	if o == nil || !o.failing {
		return
	}
	o.failing = false
	if o.reported {
		l.log.Info("store answers again", "op", op, "failures", o.failures, "after", l.clk.Now().Sub(o.since).Round(time.Millisecond))
	}
}
