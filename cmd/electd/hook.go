package main

import (
	"context"
	"log/slog"
	"os"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/internal/hook"
	"github.com/electd/electd/internal/sdnotify"
)

// hookFlags are `run`'s --on-change and --on-change-timeout.
func hookFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "on-change", EnvVars: env("ON_CHANGE"),
			Usage: "command line run with /bin/sh -c at each change of this copy's role (leading, following, waiting, stopped), " +
				"one at a time, with ELECTD_ROLE, ELECTD_PREVIOUS_ROLE, ELECTD_LEADER_ID and ELECTD_FENCING_TOKEN; " +
				"outside the child's tree, never delaying its stop (e.g. to move a VIP)"},
		&cli.DurationFlag{Name: "on-change-timeout", EnvVars: env("ON_CHANGE_TIMEOUT"), Value: hook.DefaultTimeout,
			Usage: "time a --on-change hook may run before its process group is killed (SIGKILL)"},
	}
}

// hookCommand reads --on-change ("": none) and --on-change-timeout.
func hookCommand(c *cli.Context) (cmd string, timeout time.Duration, err error) {
	cmd, timeout = c.String("on-change"), c.Duration("on-change-timeout")
	if c.IsSet("on-change") && cmd == "" {
		return "", 0, elector.Configf("on-change", "is empty; give a command line (run with /bin/sh -c), or leave the flag out")
	}
	if timeout <= 0 {
		return "", 0, elector.Configf("on-change-timeout", "must be positive, got %s; e.g. 30s", timeout)
	}
	return cmd, timeout, nil
}

// newHooks returns the runner of --on-change, told of role's changes, or
// nil without the flag.
func newHooks(rc *runConfig, role *sdnotify.Role, reg prometheus.Registerer, log *slog.Logger) (*hook.Runner, error) {
	if rc.onChange == "" {
		return nil, nil
	}
	hooks, err := hook.New(hook.Config{Command: rc.onChange, Timeout: rc.onChangeTimeout,
		Election: rc.election, ID: rc.id, Env: rc.sup.Env, Output: os.Stderr, Logger: log, Registerer: reg})
	if err != nil {
		return nil, err
	}
	role.OnChange(hooks.Notify)
	return hooks, nil
}

// withHooks adds hooks (nil: none) to the actors of `run`'s group: main
// becomes sup's loop followed by the stopped hook, and the runner an actor
// that outlives the group's interruption until main has returned, then
// runs what is queued (see hook.Runner.Run).
func withHooks(parent context.Context, hooks *hook.Runner, role *sdnotify.Role, main func(context.Context) error,
	more []func(context.Context) error) (func(context.Context) error, []func(context.Context) error, context.CancelFunc) {
	if hooks == nil {
		return main, more, func() {}
	}
	hctx, stopHooks := context.WithCancel(context.WithoutCancel(parent))
	return func(ctx context.Context) error {
			defer stopHooks()
			defer role.Stopped() // the child is stopped and the term given up
			return main(ctx)
		}, append(more, func(context.Context) error {
			return hooks.Run(hctx)
		}), stopHooks
}
