package main

import (
	"log/slog"
	"os"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

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
