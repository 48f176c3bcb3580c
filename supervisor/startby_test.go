package supervisor

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"golang.org/x/sys/unix"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// stopNewInit finds the namespace init that this process starts next (a
// child of ours whose argv[0] is the init's and that is not in seen) and
// SIGSTOPs it: a start made slow, as by a loaded host or a slow disk. ok is
// false if the command may already have been started when it was caught
// (the init has a child, or marker exists).
func stopNewInit(t *testing.T, seen map[int]bool, marker string) (pid int, ok bool) {
	t.Helper()
	end := time.Now().Add(testDeadline)
	for time.Now().Before(end) {
		pids, _ := childPids()
		for _, p := range pids {
			if seen[p] {
				continue
			}
			if _, cmd := initOf(p); !cmd {
				continue // not an init, or a probe (no command)
			}
			// Once it is stopped it forks nothing more: it is caught in time
			// if it has no child yet.
			if !holdStopped(t, p) {
				continue
			}
			tasks, _ := filepath.Glob("/proc/" + strconv.Itoa(p) + "/task/*/children")
			for _, f := range tasks {
				if b, _ := os.ReadFile(f); len(strings.TrimSpace(string(b))) > 0 {
					return p, false
				}
			}
			_, err := os.Stat(marker)
			return p, os.IsNotExist(err)
		}
	}
	t.Fatal("no namespace init appeared")
	return 0, false
}

// queuedIn is how many bytes wait in the pipe that is fd of process pid.
func queuedIn(pid, fd int) int {
	f, err := os.OpenFile("/proc/"+strconv.Itoa(pid)+"/fd/"+strconv.Itoa(fd), os.O_RDONLY|syscall.O_NONBLOCK, 0)
	if err != nil {
		return 0
	}
	defer f.Close()
	n, err := unix.IoctlGetInt(int(f.Fd()), unix.TIOCINQ) // FIONREAD
	if err != nil {
		return 0
	}
	return n
}

// initsNow is the set of our children that are namespace inits now.
func initsNow() map[int]bool {
	seen := map[int]bool{}
	pids, _ := childPids()
	for _, p := range pids {
		seen[p] = true
	}
	return seen
}

// TestNoExecAfterStopBy (hole 5 of issue 23): a start that is slow (here the
// pidns init, held stopped) must not run the command after the term's
// stop-by moment, and a start still pending at ValidUntil − StopMargin is
// killed.
func TestNoExecAfterStopBy(t *testing.T) {
	tests := []struct {
		name string
		// left is how long the term's stop-by moment is away (on the fake
		// clock) when it is granted.
		left time.Duration
		// resume: the init is continued once left has passed in real
		// time; else it stays stopped while the fake clock is run past
		// ValidUntil − StopMargin.
		resume bool
	}{
		{name: "the init checks stop-by before it execs", left: 300 * time.Millisecond, resume: true},
		{name: "a start pending at ValidUntil - margin is killed", left: 5 * time.Second},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			needMode(t, ContainPidns)
			marker := filepath.Join(t.TempDir(), "ran")
			for attempt := 0; ; attempt++ {
				if attempt == 5 {
					t.Skip("SKIP: the init was never caught before it started the command")
				}
				// The init that the candidate prepares while it waits is
				// caught, ready, before the term comes: a loaded host
				// holds it until the go message is late.
				seen := initsNow()
				campaigning := make(chan struct{}, 1)
				h := newHarness(t, func(c *Config) {
					c.Command = []string{"/bin/sh", "-c", "echo ran > " + marker + "; exec sleep 1000"}
					c.Containment, c.Logger = ContainPidns, testLogger(t)
					c.Elector.(*fakeElector).campaigning = campaigning
				})
				<-campaigning
				const stopTimeout = time.Second // newHarness's
				// ValidUntil − StopTimeout − StopMargin = now + left.
				sent := h.clk.Now().Add(-h.timing.Window() + stopTimeout + StopMargin + tt.left)
				dl := elector.NewDeadline(h.clk, h.timing, sent)
				term := elector.NewTerm(elector.Leader{ID: "me", Token: 80, Since: h.clk.Now()}, dl,
					func(context.Context) error { h.resigns <- struct{}{}; return nil })
				pid, ok := stopNewInit(t, seen, marker)
				started := time.Now()
				h.el.terms <- term
				if !ok {
					t.Logf("attempt %d: the command ran before the init was caught; again", attempt)
					h.cancel()
					_ = syscall.Kill(pid, syscall.SIGCONT)
					<-h.resigns
					os.Remove(marker)
					continue
				}
				if tt.resume {
					// The init is held until the stop-by moment has passed
					// in real time (the clock it reads), then let go.
					<-time.After(tt.left - time.Since(started) + 100*time.Millisecond)
					_ = syscall.Kill(pid, syscall.SIGCONT)
				} else {
					// Once the term's go message waits in the held init's
					// control pipe, its start is pending.
					waitFor(t, "the go message sent", func() bool { return queuedIn(pid, 3) > 0 })
					h.clk.Advance(tt.left + stopTimeout + time.Millisecond)
				}
				waitFor(t, "the term given up, or the child started", func() bool {
					select {
					case <-h.resigns:
						return true
					default:
					}
					if !tt.resume {
						// A timer armed after the Advance above, already
						// due, fires on the next one.
						h.clk.Advance(time.Millisecond)
					}
					return h.ev.has("child_started")
				})
				if h.ev.has("child_started") {
					t.Fatalf("the child was started after the term's stop-by moment; events %v", h.ev.events)
				}
				waitFor(t, "the init gone", func() bool { return procGone(pid) })
				if _, err := os.Stat(marker); err == nil {
					t.Fatalf("the command ran after the term's stop-by moment; events %v", h.ev.events)
				}
				if !h.ev.has("lost:deadline") {
					t.Fatalf("events %v, want lost:deadline", h.ev.events)
				}
				return
			}
		})
	}
}

// TestStartByPgroup: under pgroup electd execs the command itself and
// checks StartBy just before; a start that returns after KillBy is killed.
func TestStartByPgroup(t *testing.T) {
	clk := clock.NewFake(time.Unix(1_000_000, 0))
	marker := filepath.Join(t.TempDir(), "ran")
	spec := ChildSpec{Path: "/bin/sh", Args: []string{"-c", "echo ran > " + marker + "; exec sleep 1000"},
		Containment: ContainPgroup, Clock: clk}

	late := spec
	late.StartBy = clk.Now().Add(-time.Millisecond)
	if c, err := StartChild(late, testLogger(t)); !errors.Is(err, errStartLate) {
		if c != nil {
			_, _ = c.Stop(context.Background())
		}
		t.Fatalf("StartChild past StartBy = %v, want errStartLate", err)
	}
	if _, err := os.Stat(marker); err == nil {
		t.Fatal("the command ran past StartBy")
	}

	killed := spec
	killed.StartBy, killed.KillBy = clk.Now().Add(time.Hour), clk.Now()
	if c, err := StartChild(killed, testLogger(t)); !errors.Is(err, errStartLate) {
		if c != nil {
			_, _ = c.Stop(context.Background())
		}
		t.Fatalf("StartChild returning past KillBy = %v, want errStartLate", err)
	}

	inTime := spec
	inTime.StartBy, inTime.KillBy = clk.Now().Add(time.Hour), clk.Now().Add(time.Hour)
	c := runChild(t, inTime)
	waitUntil(t, testDeadline, func() bool { _, err := os.Stat(marker); return err == nil }, "the command to run")
	stopOK(t, c, context.Background())
}
