package main

import (
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
)

// parseStopTimeout parses `electd run` or `electd lock` with the real
// flags and returns the stop timeout the command would use.
func parseStopTimeout(t *testing.T, cmd string, args ...string) (time.Duration, error) {
	t.Helper()
	var (
		stop time.Duration
		err  error
	)
	command := &cli.Command{Name: cmd}
	switch cmd {
	case "run":
		command.Flags = runFlags()
		command.Action = func(c *cli.Context) error {
			var rc *runConfig
			if rc, err = parseRunConfig(c); rc != nil {
				stop = rc.sup.StopTimeout
			}
			return nil
		}
		args = append([]string{"--election", "e"}, append(args, "--", "true")...)
	case "lock":
		command.Flags = lockFlags()
		command.Action = func(c *cli.Context) error {
			var lc *lockConfig
			if lc, err = parseLockConfig(c); lc != nil {
				stop = lc.StopTimeout
			}
			return nil
		}
		args = append(args, "job", "--", "true")
	}
	app := &cli.App{Writer: io.Discard, ErrWriter: io.Discard, Commands: []*cli.Command{command}}
	if rerr := app.Run(append([]string{"electd", cmd}, args...)); rerr != nil {
		t.Fatalf("electd %s %q: %v", cmd, args, rerr)
	}
	return stop, err
}

// TestStopTimeoutFlags: run and lock pick and refuse --stop-timeout by the
// one stop rule, and a --ttl too short for any stop timeout names the
// shortest --ttl that works, never a negative stop timeout.
func TestStopTimeoutFlags(t *testing.T) {
	tests := []struct {
		name  string
		args  []string
		want  time.Duration
		field string // "" = accepted
		says  string
	}{
		{name: "default", want: 5 * time.Second},
		{name: "default for ttl 2s", args: []string{"--ttl", "2s"}, want: 485 * time.Millisecond},
		{name: "set", args: []string{"--ttl", "2s", "--stop-timeout", "900ms"}, want: 900 * time.Millisecond},
		{name: "too long", args: []string{"--ttl", "2s", "--stop-timeout", "3s"}, field: "stop-timeout",
			says: "use a stop-timeout below 970ms or a ttl of at least 5.441s"},
		{name: "ttl 100ms", args: []string{"--ttl", "100ms"}, field: "ttl", says: "use a ttl of at least 356ms"},
		{name: "ttl 100ms, renew-interval 10ms", args: []string{"--ttl", "100ms", "--renew-interval", "10ms"}, field: "ttl",
			says: "use a ttl of at least 233ms (keeping renew-interval 10ms)"},
		{name: "ttl 100ms, stop-timeout 10s", args: []string{"--ttl", "100ms", "--stop-timeout", "10s"}, field: "ttl",
			says: "use a ttl of at least 17.306s for stop-timeout 10s"},
	}
	for _, cmd := range []string{"run", "lock"} {
		for _, tc := range tests {
			t.Run(cmd+"/"+tc.name, func(t *testing.T) {
				got, err := parseStopTimeout(t, cmd, tc.args...)
				if tc.field == "" {
					if err != nil || got != tc.want {
						t.Fatalf("stop timeout %s, %v; want %s", got, err, tc.want)
					}
					return
				}
				var ce *elector.ConfigError
				if !errors.As(err, &ce) || ce.Field != tc.field {
					t.Fatalf("err = %v, want a ConfigError on %s", err, tc.field)
				}
				if !strings.Contains(ce.Reason, tc.says) {
					t.Fatalf("reason %q does not say %q", ce.Reason, tc.says)
				}
			})
		}
	}
}
