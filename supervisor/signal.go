package supervisor

import (
	"context"
	"errors"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"github.com/electd/electd/supervisor/internal/nsinit"
)

// ForwardSignals forwards every signal that electd does not use itself (see
// nsinit.ForwardedSignals for the exceptions and the reasons) to the process group of
// target(), the current child, until ctx ends. With no current child
// (target returns nil, or the child has exited) the signal is dropped. It
// returns after signal.Stop, once ctx has ended.
func ForwardSignals(ctx context.Context, target func() *Child, log *slog.Logger) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	log = log.WithGroup("child")
	sigs := make(chan os.Signal, 16)
	signal.Notify(sigs, nsinit.ForwardedSignals()...)
	defer signal.Stop(sigs)
	for {
		select {
		case <-ctx.Done():
			return
		case s := <-sigs:
			sig, ok := s.(syscall.Signal)
			if !ok {
				continue
			}
			c := target()
			if c == nil {
				log.Debug("no child; signal dropped", "signal", signalName(sig))
				continue
			}
			if err := c.Signal(sig); err != nil {
				if errors.Is(err, os.ErrProcessDone) {
					log.Debug("child gone; signal dropped", "pid", c.Pid(), "signal", signalName(sig))
				} else {
					log.Warn("forward signal failed", "pid", c.Pid(), "signal", signalName(sig), "err", err)
				}
				continue
			}
			log.Info("forwarded signal", "pid", c.Pid(), "signal", signalName(sig))
		}
	}
}
