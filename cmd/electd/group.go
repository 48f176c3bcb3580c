package main

import (
	"context"
	"errors"
	"log/slog"
	"syscall"

	group "github.com/oklog/run"

	"github.com/electd/electd/supervisor"
)

// superviseGroup runs main, the part of `run` or `lock` that holds terms,
// as one actor group with what every command that supervises a child needs:
// a handler of SIGTERM and SIGINT (which end the group: main's context ends,
// it stops the child and resigns), the forwarding of other signals to the
// child, and the reaping of orphans. more are further actors (the HTTP
// servers). When one actor returns, all are interrupted; superviseGroup
// returns after all have, with main's error and the signal that ended the
// group, if one did.
func superviseGroup(parent context.Context, log *slog.Logger, sup *supervisor.Supervisor,
	main func(ctx context.Context) error, more ...func(ctx context.Context) error) (mainErr error, sig syscall.Signal, err error) {
	ctx, cancel := context.WithCancel(parent)
	defer cancel()
	interrupt := func(error) { cancel() }

	var g group.Group
	onSignal, stopSignals := group.SignalHandler(ctx, syscall.SIGTERM, syscall.SIGINT)
	g.Add(func() error {
		err := onSignal()
		if se := (*group.SignalError)(nil); errors.As(err, &se) {
			log.Info("signal received; stopping", "signal", se.Signal.String())
		}
		return err
	}, stopSignals)
	g.Add(func() error {
		mainErr = main(ctx)
		return mainErr
	}, interrupt)
	for _, f := range more {
		g.Add(func() error { return f(ctx) }, interrupt)
	}
	g.Add(func() error {
		supervisor.ForwardSignals(ctx, sup.Child, log)
		return nil
	}, interrupt)
	g.Add(func() error {
		supervisor.ReapOrphans(ctx, log)
		return nil
	}, interrupt)
	err = g.Run()
	var se *group.SignalError
	if errors.As(err, &se) {
		sig, _ = se.Signal.(syscall.Signal)
		return mainErr, sig, nil
	}
	if errors.Is(err, context.Canceled) && parent.Err() == nil {
		err = nil // an actor ended on the group's own interruption
	}
	return mainErr, 0, err
}
