package main

import (
	"errors"
	"strings"
	"syscall"
	"testing"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
)

// FuzzParseSignal: any string is a signal in 1..64 or a refusal of
// --stop-signal; every name parseSignal prints back parses to itself.
// Run: go test -run '^$' -fuzz FuzzParseSignal -fuzztime 30s ./cmd/electd
func FuzzParseSignal(f *testing.F) {
	for _, s := range []string{"TERM", "SIGTERM", "sigint", " 15 ", "0", "64", "65", "-1", "+9", "0x0f", "SIGSIGTERM", "", "9\x00"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		sig, err := parseSignal(s)
		if err != nil {
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != "stop-signal" || ce.Reason == "" {
				t.Fatalf("parseSignal(%q) = %#v; want a *elector.ConfigError of stop-signal", s, err)
			}
			return
		}
		if sig < 1 || sig > 64 {
			t.Fatalf("parseSignal(%q) = %d, outside 1..64", s, sig)
		}
		if back, err := parseSignal(strings.TrimPrefix(unix(sig), "SIG")); err == nil && back != sig {
			t.Fatalf("parseSignal(%q) = %d but its name parses to %d", s, sig, back)
		}
	})
}

func unix(sig syscall.Signal) string {
	for name, s := range signals {
		if s == sig {
			return "SIG" + name
		}
	}
	return "-"
}

// runFlagNames are the flags FuzzRunDurations sets, in its argument order.
var runFlagNames = []string{"ttl", "renew-interval", "stop-timeout", "cool-down", "stop-signal", "on-exit"}

// FuzzRunDurations parses `electd run` timing flags from fuzzed values.
// Accepted: the timing validates. Refused: a *elector.ConfigError naming a
// field, or a flag-parse error naming the flag.
// Run: go test -run '^$' -fuzz FuzzRunDurations -fuzztime 30s ./cmd/electd
func FuzzRunDurations(f *testing.F) {
	for _, s := range [][6]string{
		{"15s", "3s", "5s", "1s", "TERM", "resign"},
		{"2s", "400ms", "3s", "0s", "KILL", "exit"},
		{"1ns", "1ns", "0s", "-1s", "HUP", "restart"},
		{"-5s", "0s", "1h", "1s", "x", "x"},
		{"9223372036s", "1s", "1s", "1s", "1", "resign"},
		{"1e3s", "", "", "", "", ""},
		{"2562047h", "2562047h", "2562047h", "2562047h", "TERM", "resign"},
	} {
		f.Add(s[0], s[1], s[2], s[3], s[4], s[5])
	}
	f.Fuzz(func(t *testing.T, ttl, renew, stop, cool, sig, onExit string) {
		vals := []string{ttl, renew, stop, cool, sig, onExit}
		args := []string{"electd", "--election", "e", "--id", "i"}
		for i, name := range runFlagNames {
			args = append(args, "--"+name+"="+vals[i])
		}
		var rc *runConfig
		app := &cli.App{
			Name: "electd", Flags: runFlags(),
			Action: func(c *cli.Context) (err error) {
				rc, err = parseRunConfig(c)
				return err
			},
			OnUsageError:   func(_ *cli.Context, err error, _ bool) error { return &usageError{err: err} },
			ExitErrHandler: func(*cli.Context, error) {},
			Writer:         discard{}, ErrWriter: discard{},
		}
		err := app.Run(append(args, "--", "true"))
		var (
			ce *elector.ConfigError
			ue *usageError
		)
		switch {
		case err == nil:
			if rc == nil {
				t.Fatalf("%q: no config and no error", args)
			}
			if verr := rc.timing.Validate(); verr != nil {
				t.Fatalf("%q accepted with an invalid timing: %v", args, verr)
			}
			if rc.sup.StopTimeout < 0 || rc.sup.CoolDown < 0 {
				t.Fatalf("%q accepted a negative duration: %+v", args, rc.sup)
			}
		case errors.As(err, &ce):
			if ce.Field == "" || ce.Reason == "" {
				t.Fatalf("%q refused without field or reason: %#v", args, ce)
			}
		case errors.As(err, &ue), strings.Contains(err.Error(), "invalid value"):
			named := false
			for _, name := range runFlagNames {
				named = named || strings.Contains(err.Error(), name)
			}
			if !named {
				t.Fatalf("%q refused without naming the flag: %v", args, err)
			}
		default:
			t.Fatalf("%q refused with %T %v; want a ConfigError or a flag error", args, err, err)
		}
	})
}

type discard struct{}

func (discard) Write(p []byte) (int, error) { return len(p), nil }
