package main

import (
	"context"
	"errors"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/urfave/cli/v2"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/store"
)

// helpOf is `electd CMD --help`, run in this process.
func helpOf(t *testing.T, cmd string) string {
	t.Helper()
	r := runElectd(t, time.Minute, nil, cmd, "--help")
	if r.code != 0 {
		t.Fatalf("electd %s --help:\n%s", cmd, r)
	}
	return r.stdout
}

// TestHelpFlags: each command's help lists the flags it uses and no
// others, and the --store help names every scheme the store package takes.
func TestHelpFlags(t *testing.T) {
	// The schemes as store/ lists them in its "unknown scheme" error.
	_, err := store.Open(context.Background(), store.Options{URL: "nosuch://h:1"}, nil)
	var ce *elector.ConfigError
	m := regexp.MustCompile(`is not one of (.*)$`).FindStringSubmatch(err.Error())
	if !errors.As(err, &ce) || m == nil {
		t.Fatalf("store.Open(nosuch://) = %v, want an error listing the schemes", err)
	}
	schemes := strings.Split(m[1], ", ")
	type row struct {
		name, cmd string
		has       []string
		hasNot    []string
	}
	tests := []row{
		{name: "leader has no candidate flags", cmd: "leader", has: []string{"--election", "--watch", "--timeout"},
			hasNot: []string{"--ttl", "--renew-interval", "--id "}},
		{name: "lock has no --election", cmd: "lock", has: []string{"--wait", "--ttl", "--id "}, hasNot: []string{"--election"}},
		{name: "status has no candidate flags", cmd: "status", has: []string{"--election", "--output", "--timeout"},
			hasNot: []string{"--ttl", "--renew-interval", "--id ", "--watch"}},
		{name: "run has the candidate flags", cmd: "run", has: []string{"--election", "--ttl", "--renew-interval", "--id "}},
	}
	for _, cmd := range []string{"run", "lock", "leader", "status"} {
		var want []string
		for _, s := range schemes {
			// A TLS scheme is its plain one with an "s" (etcds, rediss+cluster):
			// the help names it as such ("rediss+… for TLS").
			isTLS := slices.Contains(schemes, strings.TrimSuffix(s, "s")) ||
				strings.Contains(s, "s+") && slices.Contains(schemes, strings.Replace(s, "s+", "+", 1))
			if !isTLS {
				want = append(want, s+"://")
			}
		}
		tests = append(tests, row{name: cmd + " --store names every scheme", cmd: cmd, has: want})
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			help := helpOf(t, tc.cmd)
			for _, s := range tc.has {
				if !strings.Contains(help, s) {
					t.Errorf("%s --help does not name %s", tc.cmd, s)
				}
			}
			for _, s := range tc.hasNot {
				if strings.Contains(help, s) {
					t.Errorf("%s --help names %s, which does nothing there", tc.cmd, s)
				}
			}
		})
	}
}

// TestDurationFlagErrors: a duration without a unit, or that is no
// duration at all, is refused naming the flag (or the environment
// variable), why, and the fix; for every duration flag of every command.
func TestDurationFlagErrors(t *testing.T) {
	type row struct {
		name string
		args []string
		env  string // NAME=VALUE
		want string
	}
	var tests []row
	for _, cmd := range commands() {
		for _, f := range cmd.Flags {
			df, ok := f.(*cli.DurationFlag)
			if !ok {
				continue
			}
			tests = append(tests,
				row{name: cmd.Name + " --" + df.Name + " 15", args: []string{"electd", cmd.Name, "--" + df.Name, "15"},
					want: `--` + df.Name + `: "15" is not a duration; give a unit, e.g. 15s`},
				row{name: cmd.Name + " --" + df.Name + " abc", args: []string{"electd", cmd.Name, "--" + df.Name + "=abc"},
					want: `--` + df.Name + `: "abc" is not a duration; give a number and a unit (ns, us, ms, s, m, h), e.g. 15s or 1m30s`})
			for _, ev := range df.EnvVars {
				tests = append(tests, row{name: cmd.Name + " $" + ev, args: []string{"electd", cmd.Name}, env: ev + "=2.5",
					want: `$` + ev + ` (--` + df.Name + `): "2.5" is not a duration; give a unit, e.g. 2.5s`})
			}
		}
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if tc.env != "" {
				name, value, _ := strings.Cut(tc.env, "=")
				t.Setenv(name, value)
			}
			stdout := os.Stdout
			os.Stdout, _ = os.Open(os.DevNull) // urfave/cli may print usage
			err := run(context.Background(), tc.args)
			os.Stdout = stdout
			var out strings.Builder
			if code := exitCode(err, &out); code != exitUsage {
				t.Fatalf("exit %d, want %d: %v", code, exitUsage, err)
			}
			if got := strings.TrimSpace(out.String()); got != "electd: "+tc.want {
				t.Fatalf("said %q\nwant %q", got, "electd: "+tc.want)
			}
		})
	}
}
