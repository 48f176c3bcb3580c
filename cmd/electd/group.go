package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"sync"
	"syscall"

	group "github.com/oklog/run"

	"github.com/electd/electd/supervisor"
)

// shutdownSignals catches SIGTERM and SIGINT from the start of `run` or
// `lock` until the command returns, so that neither ever kills electd by
// its default action: the first one ends the command's actor group (see
// superviseGroup); while the child stops and the lease is released, a
// later SIGINT SIGKILLs the child's tree at once and a later SIGTERM is
// logged and ignored (see whileStopping). oklog/run's SignalHandler is not enough here: it
// registers only once its goroutine runs and unregisters at the first
// signal, so a signal before the group starts, or a second one during the
// shutdown, would kill electd without a resign (and, with pgroup
// containment, leave a grandchild that ignores SIGTERM running).
type shutdownSignals struct {
	ch       chan os.Signal
	stopped  chan struct{} // closed by Stop
	stopOnce sync.Once
	hurryToo []func() // also called at a second SIGINT (alsoHurry)
}

// alsoHurry has a second SIGINT call f too (the --on-change runner's
// Hurry); call it before the group runs.
func (s *shutdownSignals) alsoHurry(f func()) { s.hurryToo = append(s.hurryToo, f) }

// catchShutdown starts catching SIGTERM and SIGINT; call Stop when the
// command returns.
func catchShutdown() *shutdownSignals {
	s := &shutdownSignals{ch: make(chan os.Signal, 1), stopped: make(chan struct{})}
	signal.Notify(s.ch, syscall.SIGTERM, syscall.SIGINT)
	return s
}

// Stop stops catching the signals.
func (s *shutdownSignals) Stop() {
	s.stopOnce.Do(func() {
		signal.Stop(s.ch)
		close(s.stopped)
	})
}

// whileStopping handles each further signal until Stop. A SIGINT (the
// second Ctrl-C, as docker compose has it, from a terminal or not) calls
// hurry: the child's tree is SIGKILLed at once by the stop under way, and
// electd exits once it is reaped and the term given up. A SIGTERM is
// logged and changes nothing, so that a service manager that repeats it
// does not cut the child's grace short: the child has had --stop-signal,
// and gets SIGKILL after --stop-timeout (systemd sends its own SIGKILL
// after TimeoutStopSec).
func (s *shutdownSignals) whileStopping(log *slog.Logger, hurry func()) {
	for {
		select {
		case sig := <-s.ch:
			if sig == syscall.SIGINT {
				log.Warn("second interrupt while stopping; killing the child's tree now (SIGKILL)", "signal", sig.String())
				hurry()
				for _, f := range s.hurryToo {
					f()
				}
				continue
			}
			log.Warn("signal received while stopping; already stopping, ignored (the child is stopped with --stop-signal, then SIGKILL after --stop-timeout; SIGINT kills it now)",
				"signal", sig.String())
		case <-s.stopped:
			return
		}
	}
}

// opening returns a context for the start of a command, before its group
// runs (opening the store, which may log in and retry): it ends at the
// first signal caught. Call opened once the start is done: it returns that
// signal (0: none), and passes it on to the group's actor, so that a
// command whose start succeeded all the same stops at once.
func (s *shutdownSignals) opening(parent context.Context) (ctx context.Context, opened func() syscall.Signal) {
	ctx, cancel := context.WithCancelCause(parent)
	stop, caught := make(chan struct{}), make(chan os.Signal, 1)
	go func() {
		select {
		case sig := <-s.ch:
			caught <- sig
			cancel(fmt.Errorf("stopped by %s", sig))
		case <-stop:
			close(caught)
		}
	}()
	return ctx, func() syscall.Signal {
		close(stop)
		sig, ok := <-caught
		if !ok {
			return 0
		}
		select {
		case s.ch <- sig:
		default: // another signal is pending already
		}
		n, _ := sig.(syscall.Signal)
		return n
	}
}

// actor is the group's signal actor: it returns a *group.SignalError (as
// oklog/run's SignalHandler does) at the first signal caught, including one
// caught before the group started, or nil once interrupted; hurry is for a
// second SIGINT (see whileStopping).
func (s *shutdownSignals) actor(log *slog.Logger, hurry func()) (execute func() error, interrupt func(error)) {
	stop := make(chan struct{})
	return func() error {
			select {
			case sig := <-s.ch:
				log.Info("signal received; stopping", "signal", sig.String())
				go s.whileStopping(log, hurry)
				return &group.SignalError{Signal: sig}
			case <-stop:
				return nil
			}
		}, func(error) {
			close(stop)
		}
}

// superviseGroup runs main, the part of `run` or `lock` that holds terms,
// as one actor group with what every command that supervises a child needs:
// the shutdown signals (the first ends the group: main's context ends, it
// stops the child and resigns), the forwarding of other signals to the
// child, and the reaping of orphans. more are further actors (the HTTP
// servers). When one actor returns, all are interrupted; forwarding and
// reaping go on until main has returned, that is until the child's tree
// is gone. superviseGroup returns after every actor has, with main's error
// and the signal that ended the group, if one did.
func superviseGroup(parent context.Context, log *slog.Logger, sigs *shutdownSignals, sup *supervisor.Supervisor,
	main func(ctx context.Context) error, more ...func(ctx context.Context) error) (mainErr error, sig syscall.Signal, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	interrupt := func(error) { cancel() }
	// The child's helpers outlive the interruption: a SIGHUP while the child
	// stops is still forwarded to it, and its orphans are still reaped.
	helpers, stopHelpers := context.WithCancel(context.WithoutCancel(parent))
	defer stopHelpers()

	var g group.Group
	g.Add(sigs.actor(log, sup.Hurry))
	g.Add(func() error {
		defer stopHelpers()
		mainErr = main(ctx)
		return mainErr
	}, interrupt)
	for _, f := range more {
		g.Add(func() error { return f(ctx) }, interrupt)
	}
	g.Add(func() error {
		supervisor.ForwardSignals(helpers, sup.Child, log)
		return nil
	}, func(error) {}) // ends with main
	g.Add(func() error {
		supervisor.ReapOrphans(helpers, log)
		return nil
	}, func(error) {}) // ends with main
	err = g.Run()
	var se *group.SignalError
	if errors.As(err, &se) {
		sig, _ = se.Signal.(syscall.Signal)
		return mainErr, sig, nil
	}
	if mainErr != nil {
		// main failed: that is the group's error, whichever actor the
		// group heard from first (the helpers return as soon as main's
		// deferred stopHelpers runs, and may beat main's own return).
		// g.Run has waited for every actor, so mainErr is set.
		err = mainErr
	}
	if errors.Is(err, context.Canceled) && parent.Err() == nil {
		err = nil // an actor ended on the group's own interruption
	}
	return mainErr, 0, err
}
