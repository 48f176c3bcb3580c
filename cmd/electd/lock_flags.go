package main

import (
	"github.com/urfave/cli/v2"
)

// slotsFlag is --slots, shared by run and lock.
func slotsFlag() cli.Flag {
	return &cli.IntFlag{Name: "slots", EnvVars: env("SLOTS"), Value: 1,
		Usage: "let up to N copies hold at once (a semaphore); every copy of the election must use the same N"}
}

// lockFlags are the store flags (less --election: the lock's name is NAME)
// and the lock's own.
func lockFlags() []cli.Flag {
	return append(withoutFlags(storeFlags(), "election"),
		&cli.DurationFlag{Name: "wait", EnvVars: env("WAIT"), DefaultText: "forever",
			Usage: "how long to wait for the lock, counted from electd's start (reconnecting included); 0 tries once " +
				"(join, and leave at once unless free); then exit 75 (held by another) or 69 (store unreachable)"},
		slotsFlag(),
		&cli.DurationFlag{Name: "once-per", EnvVars: env("ONCE_PER"), DefaultText: "off",
			Usage: "record a successful run (exit 0) for this long; while the record lives, exit 0 at once without running"},
		&cli.StringFlag{Name: "stop-signal", EnvVars: env("STOP_SIGNAL"), Value: "SIGTERM", Usage: "signal that asks the child to stop"},
		&cli.DurationFlag{Name: "stop-timeout", EnvVars: env("STOP_TIMEOUT"),
			DefaultText: "5s, or less when --ttl requires", Usage: "grace after --stop-signal before SIGKILL to the child's whole process tree"},
		containmentFlag(),
		&cli.BoolFlag{Name: "shell", EnvVars: env("SHELL"), Usage: "run COMMAND with /bin/sh -c"},
		&cli.BoolFlag{Name: "forget", Usage: "clear the --once-per run record of NAME (no COMMAND); shows it and clears nothing without --yes"},
		&cli.BoolFlag{Name: "yes", Usage: "with --forget: clear the record"},
	)
}
