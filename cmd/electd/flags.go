package main

import (
	"fmt"
	"log/slog"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
	"github.com/electd/electd/supervisor"
)

func env(name string) []string { return []string{"ELECTD_" + name} }

// storeFlags say where the election lives and who this candidate is.
func storeFlags() []cli.Flag {
	host, _ := os.Hostname()
	flags := []cli.Flag{
		&cli.StringFlag{Name: "store", EnvVars: env("STORE"), Value: "etcd://127.0.0.1:2379", Usage: store.URLHelp()},
		&cli.StringFlag{Name: "store-password-file", EnvVars: env("STORE_PASSWORD_FILE"),
			Usage: "read the store password from this file (or: $ELECTD_STORE_PASSWORD, or the URL; one of them)"},
	}
	// The backends' own secrets, e.g. --sentinel-password-file.
	for _, s := range store.SecretFlags() {
		flags = append(flags, &cli.StringFlag{Name: s.Flag, EnvVars: env(strings.ToUpper(strings.ReplaceAll(s.Flag, "-", "_"))), Usage: s.Usage})
	}
	flags = append(flags,
		&cli.StringFlag{Name: "election", EnvVars: env("ELECTION"), Usage: "election name (required)"},
		&cli.StringFlag{Name: "id", EnvVars: append(env("ID"), "POD_NAME"), Value: host,
			Usage: "this candidate's id (else $POD_NAME, which a pod gets from the downward API, else the hostname)"},
		&cli.DurationFlag{Name: "ttl", EnvVars: env("TTL"), Value: elector.DefaultTTL, Usage: "lease TTL; renewals every ttl/5"},
		&cli.DurationFlag{Name: "renew-interval", EnvVars: env("RENEW_INTERVAL"), DefaultText: "ttl/5", Usage: "time between lease renewals"},
		&cli.StringFlag{Name: "log-format", EnvVars: env("LOG_FORMAT"), Value: "text", Usage: "text or json"},
		&cli.StringFlag{Name: "log-level", EnvVars: env("LOG_LEVEL"), Value: "info", Usage: "debug, info, warn or error"},
	)
	return append(flags, tlsFlags()...)
}

// withoutFlags is flags less those named.
func withoutFlags(flags []cli.Flag, names ...string) []cli.Flag {
	var out []cli.Flag
	for _, f := range flags {
		if !slices.Contains(names, f.Names()[0]) {
			out = append(out, f)
		}
	}
	return out
}

func runFlags() []cli.Flag {
	flags := append(storeFlags(),
		&cli.StringFlag{Name: "advertise", EnvVars: env("ADVERTISE"), Usage: "URL published with leadership (e.g. this service's address)"},
		&cli.StringFlag{Name: "listen", EnvVars: env("LISTEN"), Value: ":4040", Usage: "HTTP address for /leader, /readyz, /metrics…; \"off\" disables"},
		&cli.StringFlag{Name: "stop-signal", EnvVars: env("STOP_SIGNAL"), Value: "SIGTERM", Usage: "signal that asks the child to stop"},
		&cli.DurationFlag{Name: "stop-timeout", EnvVars: env("STOP_TIMEOUT"),
			DefaultText: "5s, or less when --ttl requires", Usage: "grace after --stop-signal before SIGKILL to the child's whole process tree"},
		containmentFlag(),
		&cli.StringFlag{Name: "on-exit", EnvVars: env("ON_EXIT"), Value: "resign", Usage: "when the child exits while leading: resign, restart or exit"},
		&cli.DurationFlag{Name: "cool-down", EnvVars: env("COOL_DOWN"), Value: time.Second,
			Usage: "wait before rejoining the queue after resigning; doubles with each failure of the child in a row"},
		&cli.DurationFlag{Name: "cool-down-max", EnvVars: env("COOL_DOWN_MAX"), Value: supervisor.DefaultCoolDownMax,
			Usage: "cap of the growing cool-down; a run of the child that lasts this long ends the streak of failures"},
		&cli.BoolFlag{Name: "shell", EnvVars: env("SHELL"), Usage: "run COMMAND with /bin/sh -c"},
		&cli.StringFlag{Name: "admin-token", EnvVars: env("ADMIN_TOKEN"),
			Usage: "bearer token allowing POST /resign from non-loopback addresses, at least 16 characters " +
				"(as a flag it shows in ps: prefer $ELECTD_ADMIN_TOKEN or --admin-token-file)"},
		&cli.StringFlag{Name: "admin-token-file", EnvVars: env("ADMIN_TOKEN_FILE"),
			Usage: "file holding the admin token (trailing newlines ignored); instead of --admin-token"},
		&cli.BoolFlag{Name: "admin-token-required", EnvVars: env("ADMIN_TOKEN_REQUIRED"),
			Usage: "require --admin-token on POST /resign from loopback too (set it behind a proxy or sidecar on this host, " +
				"which connects from loopback); without --admin-token electd refuses to start (it does not disable /resign)"},
		&cli.IntFlag{Name: "ready-code", EnvVars: env("READY_CODE"), Value: 200, Usage: "HTTP status of /readyz when ready"},
		&cli.IntFlag{Name: "not-ready-code", EnvVars: env("NOT_READY_CODE"), Value: 503, Usage: "HTTP status of /readyz when not ready"},
		slotsFlag(),
		&cli.StringFlag{Name: "admin-listen", EnvVars: env("ADMIN_LISTEN"),
			Usage: "separate HTTP address for /resign and /metrics (then not served on --listen); e.g. 127.0.0.1:4041"},
		&cli.StringSliceFlag{Name: "allow-host", EnvVars: env("ALLOW_HOST"),
			Usage: "a Host name that requests from loopback may use, besides loopback addresses, localhost and the --listen " +
				"and --admin-listen hosts (others are refused: DNS rebinding); e.g. the name a sidecar proxy on this host forwards"},
	)
	return append(flags, hookFlags()...)
}

// containmentFlag is --containment, for run and lock.
func containmentFlag() cli.Flag {
	return &cli.StringFlag{Name: "containment", EnvVars: env("CONTAINMENT"), Value: string(supervisor.ContainAuto),
		Usage: "how the child's process tree is contained: auto (strongest available: pidns, else userns, else pgroup), " +
			"pidns (own PID namespace: the tree dies with electd, even on kill -9; needs CAP_SYS_ADMIN), " +
			"userns (the same in a user namespace of its own, mapping electd's uid to itself; needs unprivileged user namespaces), " +
			"pgroup (process group and subreaper), cgroup (not built)"}
}

// containmentOf reads --containment and checks, before anything touches the
// network, that this host can give it (supervisor.New resolves it again,
// from the same cached probe, and reports the mode in force and why).
func containmentOf(c *cli.Context) (supervisor.Containment, error) {
	want, err := supervisor.ParseContainment(c.String("containment"))
	if err != nil {
		return "", err
	}
	if _, _, err := supervisor.ResolveContainment(want); err != nil {
		return "", err
	}
	return want, nil
}

// timingOf reads --ttl and --renew-interval and checks them (elector's
// Timing.CheckedAsSet, whose errors name the flags).
func timingOf(c *cli.Context) (elector.Timing, error) {
	t := elector.Timing{TTL: c.Duration("ttl"), RenewInterval: c.Duration("renew-interval")}
	return t.CheckedAsSet(c.IsSet("renew-interval"))
}

func requireElection(c *cli.Context) (string, error) {
	el := c.String("election")
	if el == "" {
		return "", elector.Configf("election", "is required (--election or $ELECTD_ELECTION)")
	}
	return el, nil
}

// urfave/cli's messages for a value that does not parse: a flag's
// (from Go's flag package) and an environment variable's.
var (
	badFlagValue = regexp.MustCompile(`^invalid value "(.*)" for flag -([\w-]+): parse error$`)
	badEnvValue  = regexp.MustCompile(`^could not parse "(.*)" as duration value from environment variable "(\w+)" for flag ([\w-]+): `)
)

// flagValueError rewrites urfave/cli's message for a duration that does not
// parse ("invalid value "15" for flag -ttl: parse error") into one that
// names the flag, why and the fix: --ttl: "15" is not a duration; give a
// unit, e.g. 15s. isDuration reports whether a flag name is a duration
// flag. Any other error is returned unchanged.
func flagValueError(err error, isDuration func(name string) bool) error {
	if err == nil {
		return nil
	}
	var value, where string
	if m := badFlagValue.FindStringSubmatch(err.Error()); m != nil && isDuration(m[2]) {
		value, where = m[1], "--"+m[2]
	} else if m := badEnvValue.FindStringSubmatch(err.Error()); m != nil {
		value, where = m[1], "$"+m[2]+" (--"+m[3]+")"
	} else {
		return err
	}
	fix := "give a number and a unit (ns, us, ms, s, m, h), e.g. 15s or 1m30s"
	if _, nerr := strconv.ParseFloat(strings.TrimSpace(value), 64); nerr == nil {
		fix = "give a unit, e.g. " + strings.TrimSpace(value) + "s"
	}
	return usagef("%s: %q is not a duration; %s", where, value, fix)
}

// isDurationFlag reports whether name is a duration flag of one of cmds.
func isDurationFlag(cmds []*cli.Command) func(name string) bool {
	return func(name string) bool {
		for _, cmd := range cmds {
			for _, f := range cmd.Flags {
				if _, ok := f.(*cli.DurationFlag); ok && slices.Contains(f.Names(), name) {
					return true
				}
			}
		}
		return false
	}
}

// newLogger builds the process logger from --log-format and --log-level.
func newLogger(c *cli.Context) (*slog.Logger, error) {
	var level slog.Level
	if err := level.UnmarshalText([]byte(c.String("log-level"))); err != nil {
		return nil, elector.Configf("log-level", "%q is not one of debug, info, warn, error", c.String("log-level"))
	}
	opts := &slog.HandlerOptions{Level: level, ReplaceAttr: durationText}
	switch c.String("log-format") {
	case "text":
		return slog.New(slog.NewTextHandler(c.App.ErrWriter, opts)), nil
	case "json":
		return slog.New(slog.NewJSONHandler(c.App.ErrWriter, opts)), nil
	default:
		return nil, elector.Configf("log-format", "%q is not one of text, json", c.String("log-format"))
	}
}

// durationText writes a duration as Go writes it ("5s", "1m30s"), not as
// slog's JSON handler does (nanoseconds: 5000000000), for every logger
// newLogger builds.
func durationText(_ []string, a slog.Attr) slog.Attr {
	if a.Value.Kind() == slog.KindDuration {
		a.Value = slog.StringValue(a.Value.Duration().String())
	}
	return a
}

// parseSignal accepts TERM, SIGTERM, sigterm or a number.
func parseSignal(s string) (syscall.Signal, error) {
	name := strings.ToUpper(strings.TrimSpace(s))
	name = strings.TrimPrefix(name, "SIG")
	if sig, ok := signals[name]; ok {
		return sig, nil
	}
	var n int
	if _, err := fmt.Sscanf(s, "%d", &n); err == nil && n > 0 && n < 65 && fmt.Sprint(n) == strings.TrimSpace(s) {
		return syscall.Signal(n), nil
	}
	return 0, elector.Configf("stop-signal", "%q is not a signal name (e.g. SIGTERM, INT) or number", s)
}

var signals = map[string]syscall.Signal{
	"HUP": syscall.SIGHUP, "INT": syscall.SIGINT, "QUIT": syscall.SIGQUIT, "KILL": syscall.SIGKILL,
	"USR1": syscall.SIGUSR1, "USR2": syscall.SIGUSR2, "TERM": syscall.SIGTERM, "ALRM": syscall.SIGALRM,
	"WINCH": syscall.SIGWINCH, "PWR": syscall.SIGPWR, "STOP": syscall.SIGSTOP, "CONT": syscall.SIGCONT,
}

// tlsFlags configure TLS to the store (etcds://, rediss://).
func tlsFlags() []cli.Flag {
	return []cli.Flag{
		&cli.StringFlag{Name: "ca-file", EnvVars: env("CA_FILE"),
			Usage: "PEM file of the CA(s) that sign the store's certificate (etcds://, rediss://); default: the system's roots"},
		&cli.StringFlag{Name: "cert-file", EnvVars: env("CERT_FILE"),
			Usage: "PEM client certificate presented to the store (with --key-file)"},
		&cli.StringFlag{Name: "key-file", EnvVars: env("KEY_FILE"),
			Usage: "PEM private key of --cert-file"},
		&cli.StringFlag{Name: "tls-server-name", EnvVars: env("TLS_SERVER_NAME"),
			Usage: "name the store's certificate must carry; default: the host in --store"},
	}
}
