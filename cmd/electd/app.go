package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"runtime/debug"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/health"
)

// commands is electd's command line, one row per command; each command's
// help text, flags and action are in its own file.
func commands() []*cli.Command {
	return []*cli.Command{
		{Name: "run", Usage: "campaign forever; the leader runs COMMAND (or, without one, reports ready)",
			ArgsUsage: "[-- COMMAND [ARG...]]", Description: runHelp, Flags: runFlags(), Action: supervising(runAction)},
		{Name: "lock", Usage: "take the lock NAME, run COMMAND once, release, exit with its code",
			ArgsUsage: "NAME -- COMMAND [ARG...]", Description: lockHelp, Flags: lockFlags(), Action: supervising(lockAction)},
		{Name: "leader", Usage: "print who leads (asks the store; does not campaign)",
			Description: leaderHelp, Flags: leaderFlags(), Action: withLogger(leaderAction)},
		{Name: "status", Usage: "print the election's line, every slot's holder, the term, the --once-per record", Description: statusHelp, Flags: statusFlags(), Action: withLogger(statusAction)},
		{Name: "switchover", Usage: "hand the leader's term to a named queued candidate (like patronictl switchover)",
			Description: switchoverHelp, Flags: switchoverFlags(), Action: switchoverAction},
		{Name: "demo", Usage: "embedded etcd + three sidecars + failovers, no setup",
			Description: demoHelp, Flags: demoFlags(), Action: demoAction},
		{Name: "dev", Usage: "run an embedded single-member etcd for local experiments", Flags: devFlags(), Action: devAction},
		{Name: "version", Usage: "print the version", Action: versionAction},
	}
}

// withLogger builds the process logger from --log-format and --log-level
// for action.
func withLogger(action func(c *cli.Context, log *slog.Logger) error) cli.ActionFunc {
	return func(c *cli.Context) error {
		log, err := newLogger(c)
		if err != nil {
			return err
		}
		return action(c, log)
	}
}

// supervising is withLogger for the commands that supervise a child: it
// also catches the shutdown signals from the start (see shutdownSignals).
func supervising(action func(c *cli.Context, log *slog.Logger, sigs *shutdownSignals) error) cli.ActionFunc {
	return withLogger(func(c *cli.Context, log *slog.Logger) error {
		sigs := catchShutdown()
		defer sigs.Stop()
		return action(c, log, sigs)
	})
}

// version is set at build time with -ldflags "-X main.version=…".
var version = ""

func buildVersion() string {
	if version != "" {
		return version
	}
	if bi, ok := debug.ReadBuildInfo(); ok && bi.Main.Version != "" && bi.Main.Version != "(devel)" {
		return bi.Main.Version
	}
	return "dev"
}

// buildInfo is what `electd version`, --version and electd_build_info
// report: the version, the VCS revision ("unknown" when the build did not
// record one: go run, go test, a build outside a repository) and the Go
// version.
func buildInfo() health.BuildInfo {
	b := health.BuildInfo{Version: buildVersion(), Revision: "unknown", GoVersion: runtime.Version()}
	if bi, ok := debug.ReadBuildInfo(); ok {
		for _, s := range bi.Settings {
			if s.Key == "vcs.revision" && s.Value != "" {
				b.Revision = s.Value
			}
		}
	}
	return b
}

// versionLine is the line `electd version` and `electd --version` print.
func versionLine() string {
	b := buildInfo()
	return fmt.Sprintf("electd %s (revision %s, %s)", b.Version, b.Revision, b.GoVersion)
}

// run is electd's whole command line; main only maps its error to an exit code.
func run(ctx context.Context, args []string) error {
	app := &cli.App{
		Name:    "electd",
		Usage:   "leader-election sidecar: run a command on exactly one copy at a time",
		Version: buildVersion(),
		Description: "Copies of electd campaign in etcd, Redis or a Kubernetes Lease. The leader runs COMMAND (or reports ready),\n" +
			"and stops it before its lease can lapse, so at most one copy of COMMAND runs at any instant.",
		Commands:             commands(),
		HideVersion:          false,
		EnableBashCompletion: false,
		OnUsageError: func(_ *cli.Context, err error, _ bool) error {
			if err = flagValueError(err, isDurationFlag(commands())); errors.As(err, new(*usageError)) {
				return err
			}
			return &usageError{err: err}
		},
		ExitErrHandler:  func(*cli.Context, error) {},  // exit codes are mapped in exitCode only
		CommandNotFound: func(*cli.Context, string) {}, // reported below, once
		Metadata:        map[string]any{"argv": args},  // the raw command line, for messages
	}
	for _, cmd := range app.Commands {
		cmd.OnUsageError = app.OnUsageError
	}
	cli.VersionPrinter = func(c *cli.Context) { _ = versionAction(c) } // --version says what `version` says
	if err := app.RunContext(ctx, args); err != nil {
		return flagValueError(err, isDurationFlag(app.Commands))
	}
	if len(args) > 1 && app.Command(args[1]) == nil && args[1][0] != '-' {
		return usagef("unknown command %q; see electd --help", args[1])
	}
	return nil
}

func versionAction(c *cli.Context) error {
	_, err := fmt.Fprintln(c.App.Writer, versionLine())
	return err
}
