package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"os/signal"
	"strings"
	"syscall"

	group "github.com/oklog/run"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/health"
	"github.com/electd/electd/supervisor"
)

func runCommand() *cli.Command {
	return &cli.Command{
		Name:      "run",
		Usage:     "campaign forever; the leader runs COMMAND (or, without one, reports ready)",
		ArgsUsage: "[-- COMMAND [ARG...]]",
		Description: "Every copy campaigns in --election. The leader starts COMMAND with ELECTD_FENCING_TOKEN\n" +
			"and stops it (--stop-signal, then SIGKILL after --stop-timeout) before its lease can lapse.\n" +
			"SIGTERM or SIGINT: stop the child, resign, exit 0.",
		Flags:  runFlags(),
		Action: runAction,
	}
}

// runConfig is everything `electd run` needs, checked before anything starts.
type runConfig struct {
	election, id, advertise, listen string
	timing                          elector.Timing
	sup                             supervisor.Config
	adminToken                      string
	readyCode, notReadyCode         int
}

func parseRunConfig(c *cli.Context) (*runConfig, error) {
	election, err := requireElection(c)
	if err != nil {
		return nil, err
	}
	timing, err := timingOf(c)
	if err != nil {
		return nil, err
	}
	stopSignal, err := parseSignal(c.String("stop-signal"))
	if err != nil {
		return nil, err
	}
	onExit, err := supervisor.ParseOnExit(c.String("on-exit"))
	if err != nil {
		return nil, err
	}
	stopTimeout := supervisor.DefaultStopTimeout(timing)
	if c.IsSet("stop-timeout") {
		stopTimeout = c.Duration("stop-timeout")
	}
	if err := timing.ValidateStop(stopTimeout, supervisor.StopMargin); err != nil {
		return nil, err
	}
	if c.Duration("cool-down") < 0 {
		return nil, elector.Configf("cool-down", "must not be negative, got %s", c.Duration("cool-down"))
	}
	command := c.Args().Slice()
	if c.Bool("shell") && len(command) == 0 {
		return nil, elector.Configf("shell", "needs a COMMAND after --")
	}
	if len(command) > 0 && !c.Bool("shell") {
		if _, err := exec.LookPath(command[0]); err != nil {
			return nil, elector.Configf("COMMAND", "%q cannot be run: %v", command[0], errors.Unwrap(err))
		}
	}
	id := c.String("id")
	if id == "" {
		return nil, elector.Configf("id", "is empty and the hostname is unknown; set --id")
	}
	var contain supervisor.Containment // readiness-only: nothing to contain
	if len(command) > 0 {
		if contain, err = containmentOf(c); err != nil {
			return nil, err
		}
	}
	return &runConfig{
		election: election, id: id, advertise: c.String("advertise"), listen: c.String("listen"),
		timing: timing, adminToken: c.String("admin-token"),
		readyCode: c.Int("ready-code"), notReadyCode: c.Int("not-ready-code"),
		sup: supervisor.Config{
			Timing: timing, Election: election, ID: id,
			Command: command, Shell: c.Bool("shell"), Env: childEnv(os.Environ()),
			StopSignal: stopSignal, StopTimeout: stopTimeout, OnExit: onExit, CoolDown: c.Duration("cool-down"),
			Containment: contain,
		},
	}, nil
}

// childEnv is electd's environment without its own ELECTD_* settings,
// which may carry store credentials; the supervisor adds the child's.
func childEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "ELECTD_") {
			out = append(out, kv)
		}
	}
	return out
}

func runAction(c *cli.Context) error {
	rc, err := parseRunConfig(c)
	if err != nil {
		return err
	}
	log, err := newLogger(c)
	if err != nil {
		return err
	}
	st, err := openStore(c)
	if err != nil {
		return err
	}
	defer func() {
		if err := st.close(); err != nil {
			log.Warn("closing the store connection", "err", err)
		}
	}()

	reg := prometheus.NewRegistry()
	var sup *supervisor.Supervisor
	metrics, err := health.NewMetrics(reg, rc.election, func() float64 { return sup.LeaseRemaining() })
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	el, err := st.newElector(candidate{election: rc.election, id: rc.id, address: rc.advertise,
		timing: rc.timing, log: log, ins: metrics})
	if err != nil {
		return err
	}
	defer func() {
		if err := el.Close(); err != nil {
			log.Warn("closing the elector", "err", err)
		}
	}()
	if err := setSlots(el, c.Int("slots")); err != nil {
		return err
	}
	rc.sup.Elector, rc.sup.Events, rc.sup.Logger = el, metrics, log
	if sup, err = supervisor.New(rc.sup); err != nil {
		return err
	}
	mode, why := sup.Containment()
	metrics.Containment(string(mode))
	log.Info("containment", "mode", mode, "why", why)
	view := health.NewView(rc.election, el, log)
	view.CountChanges(metrics)

	var ln net.Listener
	if rc.listen != "off" && rc.listen != "" {
		if ln, err = net.Listen("tcp", rc.listen); err != nil {
			return fmt.Errorf("listen on --listen %s: %w", rc.listen, err)
		}
	}
	// --admin-listen (issue 8): /resign and /metrics on their own listener.
	var adminLn net.Listener
	if a := c.String("admin-listen"); a != "" && a != "off" {
		if adminLn, err = net.Listen("tcp", a); err != nil {
			if ln != nil {
				_ = ln.Close()
			}
			return fmt.Errorf("listen on --admin-listen %s: %w", a, err)
		}
	}
	// --- end --admin-listen
	srv, err := health.NewServer(health.Config{
		Election: rc.election, SelfID: rc.id, View: view,
		Leading: sup.Leading, Ready: sup.Ready, Live: sup.Live, Resign: sup.Resign,
		Healthy: st.ping, Containment: string(mode),
		AdminToken: rc.adminToken, RequireToken: c.Bool("admin-token-required"),
		ReadyCode: rc.readyCode, NotReadyCode: rc.notReadyCode,
		Gatherer: reg, Logger: log, SeparateAdmin: adminLn != nil,
	})
	if err != nil {
		for _, l := range []net.Listener{ln, adminLn} {
			if l != nil {
				_ = l.Close()
			}
		}
		return err
	}
	if err := supervisor.BecomeSubreaper(); err != nil {
		log.Warn("cannot become child subreaper; orphaned grandchildren will go to init", "err", err)
	}
	log.Info("starting", "election", rc.election, "id", rc.id, "store", st.url.redacted,
		"timing", rc.timing.String(), "stop_timeout", rc.sup.StopTimeout, "command", rc.sup.Command)
	return runGroup(c.Context, log, sup, view, srv, ln, adminLn)
}

// runGroup runs every part of `electd run` as one actor group: when one
// returns, all are interrupted, and runGroup returns after all have.
func runGroup(parent context.Context, log *slog.Logger, sup *supervisor.Supervisor, view *health.View, srv *health.Server, ln, adminLn net.Listener) error {
	sigCtx, stopSignals := signal.NotifyContext(parent, syscall.SIGTERM, syscall.SIGINT)
	defer stopSignals()
	ctx, cancel := context.WithCancel(sigCtx)
	defer cancel()
	interrupt := func(error) { cancel() }

	var g group.Group
	g.Add(func() error {
		err := sup.Run(ctx)
		if sigCtx.Err() != nil && parent.Err() == nil {
			log.Info("signal received; child stopped and leadership released")
		}
		return err
	}, interrupt)
	g.Add(func() error { return view.Run(ctx) }, interrupt)
	if ln != nil {
		g.Add(func() error { return srv.Serve(ctx, ln) }, interrupt)
	}
	if adminLn != nil { // --admin-listen
		g.Add(func() error { return srv.ServeAdmin(ctx, adminLn) }, interrupt)
	}
	g.Add(func() error {
		supervisor.ForwardSignals(ctx, sup.Child, log)
		return nil
	}, interrupt)
	g.Add(func() error {
		supervisor.ReapOrphans(ctx, log)
		return nil
	}, interrupt)
	err := g.Run()
	if errors.Is(err, context.Canceled) {
		return nil
	}
	return err
}
