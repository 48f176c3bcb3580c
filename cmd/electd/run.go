package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"runtime/debug"
	"strings"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/health"
	"github.com/electd/electd/internal/hook"
	"github.com/electd/electd/internal/sdnotify"
	"github.com/electd/electd/supervisor"
)

// runHelp is the description of `electd run`.
const runHelp = "Every copy campaigns in --election. The leader starts COMMAND with ELECTD_FENCING_TOKEN\n" +
	"and stops it (--stop-signal, then SIGKILL after --stop-timeout) before its lease can lapse.\n" +
	"SIGTERM or SIGINT: stop the child, resign, exit 0. While it stops, another SIGINT (a second Ctrl-C)\n" +
	"SIGKILLs the child's whole tree at once; another SIGTERM is logged and ignored."

// runConfig is everything `electd run` needs, checked before anything starts.
type runConfig struct {
	election, id, listen    string
	cand                    elector.Candidate // validated
	timing                  elector.Timing
	sup                     supervisor.Config
	adminToken              string
	readyCode, notReadyCode int
	onChange                string // --on-change ("": none)
	onChangeTimeout         time.Duration
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
	stopTimeout, err := supervisor.StopTimeout(timing, c.Duration("stop-timeout"), c.IsSet("stop-timeout"))
	if err != nil {
		return nil, err
	}
	for _, f := range []string{"cool-down", "cool-down-max"} {
		if c.Duration(f) < 0 {
			return nil, elector.Configf(f, "must not be negative, got %s", c.Duration(f))
		}
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
	if err := hook.CheckFlags(c.String("on-change"), c.IsSet("on-change"), c.Duration("on-change-timeout")); err != nil {
		return nil, err
	}
	id := c.String("id")
	if id == "" {
		return nil, elector.Configf("id", "is empty and the hostname is unknown; set --id")
	}
	adminToken, err := adminTokenOf(c)
	if err != nil {
		return nil, err
	}
	httpSettings := health.Config{ReadyCode: c.Int("ready-code"), NotReadyCode: c.Int("not-ready-code"),
		AdminToken: adminToken, RequireToken: c.Bool("admin-token-required")}
	if err := httpSettings.CheckSettings(); err != nil {
		return nil, err
	}
	if err := elector.ValidateSlots(c.Int("slots")); err != nil {
		return nil, err
	}
	cand := elector.Candidate{Election: election, ID: id, Address: c.String("advertise"), Timing: timing, Slots: c.Int("slots")}
	if _, err := cand.Validate(); err != nil {
		return nil, err
	}
	var contain supervisor.Containment // readiness-only: nothing to contain
	if len(command) > 0 {
		if contain, err = containmentOf(c); err != nil {
			return nil, err
		}
	}
	return &runConfig{
		election: election, id: id, cand: cand, listen: c.String("listen"),
		timing: timing, adminToken: adminToken,
		readyCode: c.Int("ready-code"), notReadyCode: c.Int("not-ready-code"),
		onChange: c.String("on-change"), onChangeTimeout: c.Duration("on-change-timeout"),
		sup: supervisor.Config{
			Election: election, ID: id,
			Command: command, Shell: c.Bool("shell"), Env: childEnv(os.Environ()),
			StopSignal: stopSignal, StopTimeout: stopTimeout, StopTimeoutDefault: !c.IsSet("stop-timeout"), OnExit: onExit,
			CoolDown: c.Duration("cool-down"), CoolDownMax: c.Duration("cool-down-max"),
			Containment: contain,
		},
	}, nil
}

// childEnv is electd's environment without its own ELECTD_* settings,
// which may carry store credentials, nor systemd's NOTIFY_SOCKET and
// WATCHDOG_*, meant for electd; the supervisor adds the child's.
func childEnv(environ []string) []string {
	out := make([]string, 0, len(environ))
	for _, kv := range environ {
		if !strings.HasPrefix(kv, "ELECTD_") && !sdnotify.NotifyVar(kv) {
			out = append(out, kv)
		}
	}
	return out
}

func runAction(c *cli.Context, log *slog.Logger, sigs *shutdownSignals) error {
	rc, err := parseRunConfig(c)
	if err != nil {
		return err
	}
	reg := prometheus.NewRegistry()
	var sup *supervisor.Supervisor
	metrics, err := health.NewMetrics(reg, rc.election, func() float64 { return sup.LeaseRemaining() })
	if err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	if err := health.RegisterBuildInfo(reg, buildInfo()); err != nil {
		return fmt.Errorf("metrics: %w", err)
	}
	role := sdnotify.NewRole(sdnotify.FromEnv(), rc.id, metrics, log) // systemd's Type=notify
	hooks, err := newHooks(rc, role, reg, log)
	if err != nil {
		return err
	}
	rc.cand.Logger, rc.cand.Instrument = log, role
	octx, opened := sigs.opening(c.Context)
	st, el, done, err := openCandidate(octx, c, log, rc.cand)
	if sig := opened(); sig != 0 && err != nil {
		log.Info("signal received while the store was opening; nothing held", "signal", signalNameOf(sig))
		return nil
	}
	if err != nil {
		return err
	}
	defer done()
	rc.sup.Elector, rc.sup.Events, rc.sup.Logger = role.Campaigner(el), role, log
	if sup, err = newSupervisor(log, rc.sup); err != nil {
		return err
	}
	mode, _ := sup.Containment()
	metrics.Containment(string(mode))
	view := health.NewView(rc.election, el, log)
	view.CountChanges(metrics)

	var ln net.Listener
	if rc.listen != "off" && rc.listen != "" {
		if ln, err = net.Listen("tcp", rc.listen); err != nil {
			return fmt.Errorf("listen on --listen %s: %w", rc.listen, err)
		}
	}
	// --admin-listen: /resign and /metrics on their own listener.
	var adminLn net.Listener
	if a := c.String("admin-listen"); a != "" && a != "off" {
		if adminLn, err = net.Listen("tcp", a); err != nil {
			if ln != nil {
				_ = ln.Close()
			}
			return fmt.Errorf("listen on --admin-listen %s: %w", a, err)
		}
	}
	srv, err := health.NewServer(health.Config{
		Election: rc.election, SelfID: rc.id, View: view,
		Leading: sup.Leading, Ready: sup.Ready, Live: sup.Live, Resign: sup.Resign, ResignTo: switchoverOn(sup, st),
		ChildBackoff: func() (int, time.Duration, time.Time) { b := sup.Backoff(); return b.Failures, b.CoolDown, b.Until },
		Healthy:      st.Ping, StoreMembers: st.Members, StoreFailures: metrics.StoreFailures, Containment: string(mode),
		AdminToken: rc.adminToken, RequireToken: c.Bool("admin-token-required"),
		ReadyCode: rc.readyCode, NotReadyCode: rc.notReadyCode,
		Gatherer: reg, Logger: log, SeparateAdmin: adminLn != nil,
		AllowedHosts: allowedHosts(c),
		Status:       statusEndpoint(rc.election, el, st), Holders: holdersEndpoint(el, rc.cand.Slots),
	})
	if err != nil {
		for _, l := range []net.Listener{ln, adminLn} {
			if l != nil {
				_ = l.Close()
			}
		}
		return err
	}
	// Start-up's garbage (init functions, flags, the store's client: about
	// 2 MB) would otherwise stay until the heap first reaches 4 MB, which an
	// idle copy, allocating about 80 KB a minute, takes half an hour to do.
	// Collected now, before the campaign, it is not part of a copy's RSS.
	debug.FreeOSMemory()
	log.Info("starting", "election", rc.election, "id", rc.id, "store", st.Redacted(),
		"timing", rc.timing.String(), "stop_timeout", rc.sup.StopTimeout, "command", rc.sup.Command)
	return runGroup(c.Context, log, sigs, sup, view, role, hooks, srv, ln, adminLn)
}

// runGroup runs every part of `electd run` as one actor group (see
// superviseGroup). A signal stops the child, resigns, and exits 0.
func runGroup(parent context.Context, log *slog.Logger, sigs *shutdownSignals, sup *supervisor.Supervisor, view *health.View,
	role *sdnotify.Role, hooks *hook.Runner, srv *health.Server, ln, adminLn net.Listener) error {
	more := []func(context.Context) error{view.Run, func(ctx context.Context) error { return role.Run(ctx, view.Subscribe(ctx), sup.Live) }}
	if ln != nil {
		more = append(more, func(ctx context.Context) error { return srv.Serve(ctx, ln) })
	}
	if adminLn != nil {
		more = append(more, func(ctx context.Context) error { return srv.ServeAdmin(ctx, adminLn) })
	}
	main, hookActor := hooks.Wrap(parent, sup.Run, role.Stopped) // the stopped hook after the loop
	if hookActor != nil {
		more = append(more, hookActor)
		sigs.alsoHurry(hooks.Hurry)
	}
	_, sig, err := superviseGroup(parent, log, sigs, sup, main, more...)
	if sig != 0 {
		log.Info("signal received; child stopped and leadership released")
	}
	if errors.Is(err, context.Canceled) && parent.Err() == nil {
		return nil
	}
	return err
}

// allowedHosts are the Host names that requests from loopback may use
// besides loopback addresses and localhost (see health.Config.AllowedHosts):
// the hosts of --listen and --admin-listen, and --allow-host.
func allowedHosts(c *cli.Context) []string {
	hosts := c.StringSlice("allow-host")
	for _, a := range []string{c.String("listen"), c.String("admin-listen")} {
		if h, _, err := net.SplitHostPort(a); err == nil && h != "" {
			hosts = append(hosts, h)
		}
	}
	return hosts
}
