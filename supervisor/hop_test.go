package supervisor

import (
	"context"
	"encoding/binary"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/elector"
)

// Tests of pgroup's end-of-term sweep against a process of the child's tree
// that keeps forking a successor and exiting ("hopping"): it is never seen
// alive by a /proc scan, but its process group is.

// hopSrc is a worker that leaves the child's process group (fork, setsid)
// and then, every period µs, starts a successor and exits, for at most
// lifetime seconds. The successor is a clone(CLONE_VM) of it, as
// posix_spawn makes (on this VM a fork of even a tiny process takes ~10 ms,
// during which the forking process is in plain view; a CLONE_VM clone
// takes ~30 µs). Each hop adds one to a counter in a shared file, so a test
// can tell whether any process of the chain still runs; the second word is
// the chain's process group (and session) id.
const hopSrc = `#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>
/* hop COUNTER PERIOD_US LIFETIME_S: leaves the process group (fork, setsid),
   then every PERIOD_US starts a successor and exits. The successor is a
   clone(CLONE_VM) of it (as posix_spawn makes), far cheaper than a fork. */
static volatile long *ctr;
static long period;
static time_t end;
static char stacks[8][65536] __attribute__((aligned(16)));
static int hop(void *arg) {
	long k = (long)arg;
	pid_t parent = (pid_t)ctr[2];
	if (k > 0)
		while (getppid() == parent) sched_yield(); /* parent gone: its stack is free */
	for (;;) {
		__atomic_add_fetch(&ctr[0], 1, __ATOMIC_SEQ_CST);
		if (time(0) > end) _exit(0);
		if (period > 0) usleep(period);
		ctr[2] = getpid();
		char *sp = stacks[(k + 1) % 8] + sizeof stacks[0];
		if (clone(hop, sp, CLONE_VM | SIGCHLD, (void *)(k + 1)) > 0) _exit(0);
		usleep(1000);
	}
}
int main(int argc, char **argv) {
	int fd = open(argv[1], O_RDWR | O_CREAT, 0644);
	if (fd < 0 || ftruncate(fd, 24) < 0) return 1;
	ctr = mmap(0, 24, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (ctr == MAP_FAILED) return 1;
	period = atol(argv[2]);
	end = time(0) + atol(argv[3]);
	if (fork() != 0) _exit(0);
	setsid();
	ctr[1] = getpid(); /* the chain's process group and session */
	return hop(0);
}
`

// hopperBin compiles hopSrc into dir (skips without a C compiler).
func hopperBin(t *testing.T, dir string) string {
	t.Helper()
	return ccBin(t, dir, "hop", hopSrc)
}

// hopCount reads the hopper's counter (0 if not there yet).
func hopCount(path string) uint64 {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 8 {
		return 0
	}
	return binary.LittleEndian.Uint64(b)
}

// hopGroup reads the chain's process group (and session) id.
func hopGroup(path string) int {
	b, err := os.ReadFile(path)
	if err != nil || len(b) < 24 {
		return 0
	}
	return int(binary.LittleEndian.Uint64(b[8:]))
}

// TestSweepCatchesForkHopper: a worker of the child's tree that left its
// process group and keeps forking a successor and exiting. At any instant
// one process of the chain runs, but not the one a scan of /proc listed:
// by the time its stat is read it is a zombie (reparented to electd) and
// its successor was not in the listing. The sweep must still end the chain
// before the term is given up, under either rule for orphans.
func TestSweepCatchesForkHopper(t *testing.T) {
	for _, tt := range []struct {
		name   string
		rule   sweepRule
		period int // µs between hops
	}{
		{name: "every orphan/1ms", period: 1000},
		{name: "every orphan/200us", period: 200},
	} {
		t.Run(tt.name, func(t *testing.T) {
			useRule(t, tt.rule)
			// Built before the reaper starts, which reaps any child it is
			// not told of: cc among them ("cc: waitid: no child processes").
			dir := t.TempDir()
			hop, ctr := hopperBin(t, dir), filepath.Join(dir, "ctr")
			// electd reaps the chain's zombies as it runs (cmd/electd does).
			rctx, rcancel := context.WithCancel(context.Background())
			t.Cleanup(rcancel)
			go ReapOrphans(rctx, nil)

			main := filepath.Join(dir, "main.sh")
			writeScript(t, main, "#!/bin/sh\n"+hop+" "+ctr+" "+strconv.Itoa(tt.period)+" 30\nexec sleep 1000\n")
			// If the test fails, the chain is killed by its process
			// group (a group kill cannot miss a forking member).
			t.Cleanup(func() {
				if g := hopGroup(ctr); g > 0 {
					_ = syscall.Kill(-g, syscall.SIGKILL)
				}
			})

			h := newHarness(t, func(c *Config) {
				c.Command, c.Containment, c.Logger = []string{main}, ContainPgroup, testLogger(t)
			})
			atResign := make(chan uint64, 1)
			dl := elector.NewDeadline(h.clk, h.timing, h.clk.Now())
			term := elector.NewTerm(elector.Leader{ID: "me", Token: 77, Since: h.clk.Now()}, dl,
				func(context.Context) error { atResign <- hopCount(ctr); return nil })
			h.el.terms <- term
			waitFor(t, "the hopper to hop", func() bool { return hopCount(ctr) > 50 })
			if err := h.sup.Resign(context.Background()); err != nil {
				t.Fatal(err)
			}
			var n uint64
			select {
			case n = <-atResign:
			case <-time.After(testDeadline):
				t.Fatal("the term was not given up")
			}
			// Was any process of the chain still running when the term
			// was given up? Then the counter moves on after it.
			end := time.Now().Add(time.Second)
			for time.Now().Before(end) {
				if m := hopCount(ctr); m > n+1 {
					alive := "has ended since"
					if g := hopGroup(ctr); g > 0 && !groupEmpty(g) {
						alive = "still runs"
					}
					t.Fatalf("the term was given up at hop %d; the worker's chain ran on to hop %d, and %s", n, m, alive)
				}
				time.Sleep(time.Millisecond) // observing for a bounded time
			}
		})
	}
}

// groupHopSrc is a child whose main process becomes a chain that keeps
// leaving its process group: it forks (or, with "clone" in MODE, clones
// with CLONE_VM) a successor and exits; each successor first moves to a
// group of its own (setpgid(0, 0); with "setsid" in MODE, a session),
// waits until its parent is gone, and hops on, until HOP_US µs after the
// main process started. The last one writes its pid to PIDFILE and sleeps.
// A scan of /proc lists one process of the chain and reads it as a zombie
// (reparented to electd), whose successor it did not list, in a group the
// zombie's group kill does not reach. (From an adversarial review of the
// sweep's back-to-back scans.)
const groupHopSrc = `#define _GNU_SOURCE
#include <fcntl.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
static char stacks[8][65536] __attribute__((aligned(16)));
static long long end_ns;
static const char *pidfile;
static volatile pid_t lastpid;
static int sessions, clones;
static long long now(void) {
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1000000000LL + ts.tv_nsec;
}
static int hop(void *arg);
static void next(long k) {
	lastpid = getpid();
	if (clones) {
		if (clone(hop, stacks[(k + 1) % 8] + sizeof stacks[0], CLONE_VM | SIGCHLD, (void *)(k + 1)) > 0) _exit(0);
		return;
	}
	pid_t c = fork();
	if (c > 0) _exit(0);
	if (c == 0) hop((void *)(k + 1));
}
static int hop(void *arg) {
	long k = (long)arg;
	pid_t parent = lastpid;
	if (sessions) setsid(); else setpgid(0, 0);
	while (getppid() == parent) sched_yield(); /* parent gone: its stack is free */
	if (now() >= end_ns) {
		char buf[32];
		int n = snprintf(buf, sizeof buf, "%d\n", getpid());
		int fd = open(pidfile, O_WRONLY | O_CREAT | O_APPEND, 0644);
		if (fd >= 0) { write(fd, buf, n); close(fd); }
		for (;;) pause();
	}
	next(k);
	for (;;) pause();
}
int main(int argc, char **argv) {
	pidfile = argv[1];
	end_ns = now() + atoll(argv[2]) * 1000LL;
	sessions = strstr(argv[3], "setsid") != 0;
	clones = strstr(argv[3], "clone") != 0;
	next(0);
	return 1;
}
`

// TestSweepCatchesGroupHopper: the child's main process turns into a chain
// that forks, leaves its group and exits, over and over, for a few ms (see
// groupHopSrc), and then one of it settles. Stop, called as soon as the main
// process is reaped (as a term's end does), must not return while any
// process of the chain runs. A scan that reads one as a zombie of electd's
// must not count as empty: with two back-to-back scans that did, the chain
// outlived Stop in about half the runs (fork and setpgid, 8 ms), and with
// them 10 ms apart it still did when it hopped for 20 ms (63 of 100 in the
// review; 1 of 30 in a run of its test here).
func TestSweepCatchesGroupHopper(t *testing.T) {
	bin := ccBin(t, t.TempDir(), "grouphop", groupHopSrc)
	rctx, rcancel := context.WithCancel(context.Background())
	t.Cleanup(rcancel)
	go ReapOrphans(rctx, nil) // electd reaps orphans as they come (cmd/electd does)
	for _, tt := range []struct {
		name string
		mode string
		hop  time.Duration
		runs int
	}{
		{name: "fork, setpgid, 8ms", mode: "fork", hop: 8 * time.Millisecond, runs: 40},
		{name: "clone, setsid, 20ms", mode: "clone,setsid", hop: 20 * time.Millisecond, runs: 20},
	} {
		t.Run(tt.name, func(t *testing.T) {
			for i := range tt.runs {
				pidFile := filepath.Join(t.TempDir(), "settled")
				started := time.Now()
				c, err := StartChild(ChildSpec{Path: bin, Args: []string{pidFile, strconv.FormatInt(tt.hop.Microseconds(), 10), tt.mode},
					Containment: ContainPgroup, Env: []string{"ELECTD_FENCING_TOKEN=" + strconv.Itoa(900+i)}}, nil)
				if err != nil {
					t.Fatal(err)
				}
				waitDone(t, c)
				stopOK(t, c, context.Background())
				// Any process of the chain left settles by tt.hop after the
				// start and says so; a bounded look for it after that.
				end := started.Add(tt.hop + 100*time.Millisecond)
				for time.Now().Before(end) && len(readPids(pidFile)) == 0 {
					time.Sleep(time.Millisecond)
				}
				if alive := aliveOf(readPids(pidFile)); len(alive) > 0 {
					_ = syscall.Kill(alive[0], syscall.SIGKILL)
					t.Fatalf("run %d: Stop returned, and process %d of the chain runs on", i, alive[0])
				}
			}
		})
	}
}
