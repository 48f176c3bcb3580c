// Package proc has what the end-to-end, lock, torture and benchmark
// harnesses share to watch the processes they test through /proc, and the
// environment to start them in. (They start them with internal/deathsig, so
// that they die with the test.)
package proc

import (
	"github.com/electd/electd/internal/deathsig"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"
)

// Writes is how many write system calls process pid has made (syscw in
// /proc/PID/io; reading it needs the rights of ptrace), or -1 if it cannot
// be read.
func Writes(pid int) int {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/io")
	if err != nil {
		return -1
	}
	for _, l := range strings.Split(string(b), "\n") {
		if v, ok := strings.CutPrefix(l, "syscw: "); ok {
			if n, err := strconv.Atoi(v); err == nil {
				return n
			}
		}
	}
	return -1
}

// Alive reports whether pid exists and is not a zombie.
func Alive(pid int) bool { return deathsig.Alive(pid) }

// GoneAt waits, polling every poll and at most within, until pid is gone
// (or a zombie); it returns when it saw it gone, and whether it did.
func GoneAt(pid int, within, poll time.Duration) (time.Time, bool) {
	deadline := time.Now().Add(within)
	for Alive(pid) {
		if time.Now().After(deadline) {
			return time.Time{}, false
		}
		time.Sleep(poll) // polling a condition with a deadline
	}
	return time.Now(), true
}

// WaitGone waits at most within until pid is gone (or a zombie) and
// reports whether it is.
func WaitGone(pid int, within time.Duration) bool {
	_, ok := GoneAt(pid, within, time.Millisecond)
	return ok
}

// IsOurs reports whether pid runs the program prog (by argv[0]'s base
// name), so that a leftover pid reused by another process is never killed.
func IsOurs(pid int, prog string) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
	if err != nil {
		return false
	}
	argv0, _, _ := strings.Cut(string(b), "\x00")
	return filepath.Base(argv0) == filepath.Base(prog)
}

// BaseEnv is the test's environment without ELECTD_* and RECORD_* settings
// (which would change electd's flags or the recorder), plus extra.
func BaseEnv(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "ELECTD_") && !strings.HasPrefix(kv, "RECORD_") {
			env = append(env, kv)
		}
	}
	return append(env, extra...)
}

// Crashes lists the signs in a Go program's output that it raced, panicked
// or died of a fatal runtime error, each found at most once.
func Crashes(output string) []string {
	var found []string
	for _, bad := range []string{"WARNING: DATA RACE", "panic: ", "fatal error: "} {
		if strings.Contains(output, bad) {
			found = append(found, bad)
		}
	}
	return found
}
