package main

import (
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"
)

// TestRefusedBeforeConnecting runs electd with bad input against a listener
// that counts connections: every refusal must come before the first one,
// as one line naming the flag or argument.
func TestRefusedBeforeConnecting(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ln.Close() })
	var dials atomic.Int64
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			dials.Add(1)
			_ = c.Close()
		}
	}()
	dir := t.TempDir()
	tokenFile, shortTokenFile := filepath.Join(dir, "token"), filepath.Join(dir, "short")
	if err := os.WriteFile(tokenFile, []byte("0123456789abcdef0123\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(shortTokenFile, []byte("short\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, scheme := range []string{"etcd", "redis"} {
		st := scheme + "://" + ln.Addr().String()
		tests := []struct {
			name string
			args []string
			code int
			want string // the one line of stderr starts with it
		}{
			{name: "run election with a space", args: []string{"run", "--store", st, "--election", "a b", "--", "true"},
				code: exitUsage, want: "electd: invalid election: "},
			{name: "run election with a slash", args: []string{"run", "--store", st, "--election", "a/b"},
				code: exitUsage, want: "electd: invalid election: "},
			{name: "run id with braces", args: []string{"run", "--store", st, "--election", "e", "--id", "{x}"},
				code: exitUsage, want: "electd: invalid id: "},
			{name: "run advertise with a newline", args: []string{"run", "--store", st, "--election", "e", "--advertise", "http://x\n"},
				code: exitUsage, want: "electd: invalid advertise: "},
			{name: "run zero slots", args: []string{"run", "--store", st, "--election", "e", "--slots", "0"},
				code: exitUsage, want: "electd: invalid slots: "},
			{name: "run token required without a token", args: []string{"run", "--store", st, "--election", "e", "--admin-token-required"},
				code: exitUsage, want: "electd: invalid admin-token-required: "},
			{name: "run admin token too short", args: []string{"run", "--store", st, "--election", "e", "--admin-token", "short-token"},
				code: exitUsage, want: "electd: invalid admin-token: "},
			{name: "run admin token twice", args: []string{"run", "--store", st, "--election", "e", "--admin-token", "0123456789abcdef0123",
				"--admin-token-file", tokenFile}, code: exitUsage, want: "electd: invalid admin-token-file: "},
			{name: "run admin token file missing", args: []string{"run", "--store", st, "--election", "e", "--admin-token-file", tokenFile + ".missing"},
				code: exitUsage, want: "electd: invalid admin-token-file: "},
			{name: "run admin token file too short", args: []string{"run", "--store", st, "--election", "e", "--admin-token-file", shortTokenFile},
				code: exitUsage, want: "electd: invalid admin-token-file: "},
			{name: "run election with a bidi override", args: []string{"run", "--store", st, "--election", "ab\u202ec"},
				code: exitUsage, want: "electd: invalid election: "},
			{name: "run election with a zero-width space", args: []string{"run", "--store", st, "--election", "a\u200bb"},
				code: exitUsage, want: "electd: invalid election: "},
			{name: "run election decomposed (not NFC)", args: []string{"run", "--store", st, "--election", "caf" + "e\u0301"},
				code: exitUsage, want: "electd: invalid election: "},
			{name: "lock name with a byte order mark", args: []string{"lock", "--store", st, "\ufeffjob", "--", "true"},
				code: exitUsage, want: "electd: invalid NAME: "},
			{name: "run empty on-change", args: []string{"run", "--store", st, "--election", "e", "--on-change", ""},
				code: exitUsage, want: "electd: invalid on-change: "},
			{name: "run zero on-change timeout", args: []string{"run", "--store", st, "--election", "e", "--on-change", "true",
				"--on-change-timeout", "0s"}, code: exitUsage, want: "electd: invalid on-change-timeout: "},
			{name: "run negative on-change timeout", args: []string{"run", "--store", st, "--election", "e", "--on-change", "true",
				"--on-change-timeout", "-1s"}, code: exitUsage, want: "electd: invalid on-change-timeout: "},
			{name: "run ready code", args: []string{"run", "--store", st, "--election", "e", "--ready-code", "99"},
				code: exitUsage, want: "electd: invalid ready-code: "},
			{name: "leader election with a space", args: []string{"leader", "--store", st, "--election", "a b"},
				code: exitUsage, want: "electd: invalid election: "},
			{name: "lock name with a space", args: []string{"lock", "--store", st, "a b", "--", "true"},
				code: exitUsage, want: "electd: invalid NAME: "},
			{name: "lock without NAME", args: []string{"lock", "--store", st, "--", "true"},
				code: exitUsage, want: "electd: lock needs a NAME before --"},
			{name: "lock without COMMAND", args: []string{"lock", "--store", st, "job"},
				code: exitUsage, want: "electd: lock job needs a COMMAND after --"},
			{name: "lock without anything", args: []string{"lock", "--store", st},
				code: exitUsage, want: "electd: lock needs NAME -- COMMAND"},
		}
		for _, tc := range tests {
			t.Run(scheme+"/"+tc.name, func(t *testing.T) {
				before := dials.Load()
				r := runElectd(t, 30*time.Second, nil, tc.args...)
				lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
				if r.code != tc.code || len(lines) != 1 || !strings.HasPrefix(lines[0], tc.want) {
					t.Fatalf("want exit %d and one line %q…:\n%s", tc.code, tc.want, r)
				}
				if n := dials.Load() - before; n != 0 {
					t.Fatalf("electd connected to the store %d times before refusing its input:\n%s", n, r)
				}
			})
		}
	}
}

// TestPasswordFileReadableByAll: a --store-password-file that every user
// may read is used, with a warning naming the flag and the fix.
func TestPasswordFileReadableByAll(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		mode os.FileMode
		warn bool
	}{
		{name: "0644 warns", mode: 0o644, warn: true},
		{name: "0604 warns", mode: 0o604, warn: true},
		{name: "0640 is quiet", mode: 0o640},
		{name: "0600 is quiet", mode: 0o600},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := filepath.Join(dir, tc.mode.String())
			if err := os.WriteFile(f, []byte("pw\n"), tc.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(f, tc.mode); err != nil { // past the umask
				t.Fatal(err)
			}
			r := runElectd(t, 30*time.Second, nil, "leader", "--store", "etcd://app@"+closedPort(t), "--election", "e",
				"--store-password-file", f, "--timeout", "100ms")
			warned := strings.Contains(r.stderr, "level=WARN") && strings.Contains(r.stderr, "store-password-file") &&
				strings.Contains(r.stderr, "chmod")
			if warned != tc.warn {
				t.Fatalf("warned = %v, want %v:\n%s", warned, tc.warn, r)
			}
		})
	}
}
