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
// limited per kind of request (op, e.g. "renew", "campaign", "watch") and
// class of error (ErrorClass: "MISCONF", "READONLY", "timeout", ...):
//
//   - the first failure of a class is a warning at once ("store request
//     failed; retrying");
//   - while it keeps failing, at most one warning per StoreLogInterval and
//     class ("store request still failing; retrying") gives the failures
//     since the outage began ("failures", "for") and those of the class left
//     out since its previous warning ("suppressed"); each one left out is
//     logged at debug level;
//   - the first success after a reported outage is logged ("store answers
//     again") with the number of failures and how long the outage lasted.
//
// A request that fails and succeeds in turn (flapping) still gets at most
// one warning per interval and class: an outage that begins within the
// interval of the last warning of its class is announced only once that
// interval has passed (if it still fails), and its end only if it was
// announced.
//
// Every failure is also given to the Instrument (StoreError, which counts
// it), and the first success after failures too (StoreAnswered), so that
// /healthz can say which requests fail now.
//
// It is safe for concurrent use.
type StoreLog struct {
	clk  clock.Clock
	log  *slog.Logger
	inst Instrument

	classify func(error) string // nil: ErrorClass alone

	mu  sync.Mutex
	ops map[string]*outage
}

// outage is the state of one op.
type outage struct {
	failing  bool
	since    time.Time // first failure of the current outage
	failures int       // in the current outage
	reported bool      // a line announced the current outage
	classes  map[string]*classLog
}

// classLog is the warnings about one class of error of one op.
type classLog struct {
	warned     time.Time // last warning; zero: none yet
	suppressed int       // failures not warned about since then
}

// NewStoreLog reports on log and to inst, timing intervals with clk
// (clock.Real if nil). log and inst may be nil.
func NewStoreLog(clk clock.Clock, log *slog.Logger, inst Instrument) *StoreLog {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &StoreLog{clk: clock.OrReal(clk), log: log, inst: OrNop(inst), ops: map[string]*outage{}}
}

// ClassifyWith makes l name the class of an error that carries none (see
// Classify) with f: the backend's own reading of its store's errors. It
// returns l; call it before l is used.
func (l *StoreLog) ClassifyWith(f func(error) string) *StoreLog {
	l.classify = f
	return l
}

// Failed records a failed store request of kind op that will be retried.
// attrs are added to the line (key-value pairs, as for slog).
func (l *StoreLog) Failed(op string, err error, attrs ...any) {
	l.failed(op, err, true, attrs)
}

// Retrying is Failed for an error already given to the Instrument where it
// happened: it logs, and does not count it again.
func (l *StoreLog) Retrying(op string, err error, attrs ...any) {
	l.failed(op, err, false, attrs)
}

func (l *StoreLog) failed(op string, err error, count bool, attrs []any) {
	class := ErrorClass(err)
	if class == ClassOther && l.classify != nil {
		class = l.classify(err)
		err = Classify(class, err)
	}
	if count {
		l.inst.StoreError(op, err)
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	now := l.clk.Now()
	o := l.ops[op]
	if o == nil {
		o = &outage{classes: map[string]*classLog{}}
		l.ops[op] = o
	}
	if !o.failing {
		o.failing, o.since, o.failures, o.reported = true, now, 0, false
	}
	o.failures++
	c := o.classes[class]
	if c == nil {
		c = &classLog{}
		o.classes[class] = c
	}
	args := append([]any{"op", op, "class", class, "err", err}, attrs...)
	if !c.warned.IsZero() && now.Sub(c.warned) < StoreLogInterval {
		c.suppressed++
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
	if c.suppressed > 0 {
		args = append(args, "suppressed", c.suppressed)
	}
	l.log.Warn(msg, args...)
	o.reported, c.warned, c.suppressed = true, now, 0
}

// GaveUp records that the failing requests of kind op are no longer
// retried (a cleanup whose time ran out): op does not fail now, though it
// did not recover. The caller says what was given up.
func (l *StoreLog) GaveUp(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if o := l.ops[op]; o != nil && o.failing {
		o.failing = false
		l.inst.StoreAnswered(op)
	}
}

// Answered records a successful store request of kind op: after failures it
// tells the Instrument, and after a reported outage it logs the recovery.
// It is cheap when op was not failing.
func (l *StoreLog) Answered(op string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	o := l.ops[op]
	if o == nil || !o.failing {
		return
	}
	o.failing = false
	l.inst.StoreAnswered(op)
	if o.reported {
		l.log.Info("store answers again", "op", op, "failures", o.failures, "after", l.clk.Now().Sub(o.since).Round(time.Millisecond))
	}
}
