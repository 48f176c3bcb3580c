package hook

import (
	"context"
	"time"

	"github.com/electd/electd/elector"
)

// CheckFlags checks --on-change (set: given, if empty) and
// --on-change-timeout, before anything touches the network.
func CheckFlags(command string, set bool, timeout time.Duration) error {
	if set && command == "" {
		return elector.Configf("on-change", "is empty; give a command line (run with /bin/sh -c), or leave the flag out")
	}
	if timeout <= 0 {
		return elector.Configf("on-change-timeout", "must be positive, got %s; e.g. 30s", timeout)
	}
	return nil
}

// Wrap returns, for an oklog/run group, main followed by stopped (which
// tells r electd's last change, once main has stopped the child and given
// up the term) and r's actor: Run, until main has returned (not until the
// group is interrupted: changes come until then), and then the change
// still queued. The actor ignores the group's context; main ends it. On a
// nil Runner Wrap returns main and a nil actor.
func (r *Runner) Wrap(parent context.Context, main func(context.Context) error, stopped func()) (
	wrapped, actor func(context.Context) error) {
	if r == nil {
		return main, nil
	}
	ctx, mainReturned := context.WithCancel(context.WithoutCancel(parent))
	return func(gctx context.Context) error {
			defer mainReturned()
			defer stopped()
			return main(gctx)
		}, func(context.Context) error {
			return r.Run(ctx)
		}
}
