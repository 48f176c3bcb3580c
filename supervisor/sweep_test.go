package supervisor

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"
)

// Tests of pgroup's sweep: the orphans of the child's tree, reparented to
// electd (a subreaper), are found and killed, whatever they do to their
// environment and however fast the child exits.

// daemonTree writes a child whose main process daemonises n workers (a
// double fork with setsid: each worker's parent exits at once, so it is
// reparented to electd), waits until each has written its pid to pidFile,
// and SIGKILLs itself. body is the worker's code: it runs with "$1" the
// worker script itself and "$2" pidFile, and must append its pid to "$2"
// (writePid) once it is in the state the test is about.
func daemonTree(t *testing.T, n int, body string) (cmd []string, pidFile string) {
	t.Helper()
	dir := t.TempDir()
	pidFile = filepath.Join(dir, "pids")
	worker := filepath.Join(dir, "worker.sh")
	// A worker ends itself 5 minutes after main.sh started (uptime, read
	// without a fork), far past any test of it: if the test binary dies
	// before its cleanups, workers that exec in a loop do not spin forever.
	writeScript(t, worker, "#!/bin/sh\ntrap '' TERM\n"+
		`[ -z "$SWEEP_TEST_UNTIL" ] || { read up _ < /proc/uptime; [ "${up%.*}" -lt "$SWEEP_TEST_UNTIL" ] || exit 0; }`+"\n"+
		body+"\n")
	main := filepath.Join(dir, "main.sh")
	script := "#!/bin/sh\ntrap '' TERM\n" +
		`read up _ < /proc/uptime; export SWEEP_TEST_UNTIL=$(( ${up%.*} + 300 ))` + "\n"
	for range n {
		script += "sh -c 'setsid " + worker + " " + worker + " " + pidFile + " &' &\n"
	}
	script += "while [ \"$(cat " + pidFile + " 2>/dev/null | wc -l)\" -lt " + strconv.Itoa(n) + " ]; do sleep 0.01; done\n" +
		"kill -9 $$\n"
	writeScript(t, main, script)
	return []string{main}, pidFile
}

// writePid is shell code that appends the pid of the shell to the file "$2".
const writePid = `read p rest < /proc/self/stat; echo "$p" >> "$2"`

// sweepTerm grants one term to a supervisor whose child is cmd, waits until
// n workers have written their pids, resigns, and returns the workers alive
// at the moment the term was given up.
func sweepTerm(t *testing.T, cmd []string, pidFile string, n int) (pids, alive []int) {
	t.Helper()
	th := &treeHarness{pidFile: pidFile}
	th.harness = newHarness(t, func(c *Config) {
		c.Command, c.Containment, c.Logger = cmd, ContainPgroup, testLogger(t)
	})
	th.grant(t, 50)
	waitFor(t, strconv.Itoa(n)+" worker pids", func() bool { pids = readPids(pidFile); return len(pids) == n })
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	waitFor(t, "the main process's exit", func() bool { return th.ev.has("child_exited:signaled") })
	return pids, th.awaitResign(t)
}

// TestSweepFindsExecingDaemons (hole 1 of issue 23): daemonised workers that
// exec in a loop. While a process execs, its /proc/PID/environ reads empty
// for a moment; a sweep that looked for the fencing token there missed such
// a worker, and gave the term up with it alive.
// Both rules of the sweep are tried: every orphan counts, and (with
// strangers about) only marked ones.
func TestSweepFindsExecingDaemons(t *testing.T) {
	const n = 12
	for _, rule := range sweepRules {
		for i := range 3 {
			t.Run(rule.name+"/"+strconv.Itoa(i), func(t *testing.T) {
				useRule(t, rule.rule)
				cmd, pidFile := daemonTree(t, n, `[ -n "$3" ] || { `+writePid+`; }; exec "$1" "$1" "$2" again`)
				if pids, alive := sweepTerm(t, cmd, pidFile, n); len(alive) > 0 {
					t.Fatalf("workers %v of %v alive when the term was given up", alive, pids)
				}
			})
		}
	}
}

// sweepRules are the two rules by which the sweep counts an orphan.
var sweepRules = []struct {
	name string
	rule sweepRule
}{
	{name: "every orphan"},
	{name: "marked orphans", rule: sweepRule{strangers: "test: strangers may be orphaned to electd"}},
}

// useRule makes the sweep use rule until the test ends.
func useRule(t *testing.T, rule sweepRule) {
	was := orphanRule
	orphanRule = rule
	t.Cleanup(func() { orphanRule = was })
}

// TestTreeMembersFindsExecingOrphans (hole 1 of issue 23, the sweep's scan
// itself): every scan of the tree, for two seconds, finds every one of a dozen
// daemonised workers that exec in a loop.
func TestTreeMembersFindsExecingOrphans(t *testing.T) {
	for _, rule := range sweepRules {
		t.Run(rule.name, func(t *testing.T) {
			useRule(t, rule.rule)
			treeMembersFindsExecingOrphans(t)
		})
	}
}

func treeMembersFindsExecingOrphans(t *testing.T) {
	const n = 12
	cmd, pidFile := daemonTree(t, n, `[ -n "$3" ] || { `+writePid+`; }; exec "$1" "$1" "$2" again`)
	c := runChild(t, ChildSpec{Path: cmd[0], Env: []string{"ELECTD_FENCING_TOKEN=51"}})
	waitDone(t, c)
	pids := readPids(pidFile)
	t.Cleanup(func() {
		for _, p := range pids {
			_ = syscall.Kill(p, syscall.SIGKILL)
		}
	})
	if len(pids) != n {
		t.Fatalf("%d worker pids, want %d", len(pids), n)
	}
	scans, missed := 0, map[int]int{}
	for end := time.Now().Add(2 * time.Second); time.Now().Before(end); scans++ {
		found := map[int]bool{}
		members, _, _, err := treeMembers(c.pid, c.ticks, c.marker, false)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range members {
			found[p] = true
		}
		for _, p := range pids {
			if !found[p] {
				missed[p]++
			}
		}
	}
	if len(missed) > 0 {
		t.Fatalf("in %d scans, workers were missed (pid: times) %v; all %d ran throughout", scans, missed, n)
	}
	t.Logf("%d scans found all %d workers", scans, n)
}

// TestSweepFindsUnmarkedDaemons (hole 3 of issue 23): daemons that drop
// ELECTD_FENCING_TOKEN from their environment (env -i) or overwrite it with
// a process title (perl's $0, as setproctitle does) are the child's too.
func TestSweepFindsUnmarkedDaemons(t *testing.T) {
	// setproctitle's way: the title is written over argv and the
	// environment, which are contiguous; the rest is zeroed.
	title := filepath.Join(t.TempDir(), "title.py")
	writeScript(t, title, "import ctypes, os, sys, time\n"+
		"f = open('/proc/self/stat').read().rsplit(')', 1)[1].split()\n"+
		"start, end = int(f[45]), int(f[48])  # arg_start .. env_end\n"+
		"ctypes.memset(start, 0, end - start)\n"+
		"ctypes.memmove(start, b'worker: idle', 12)\n"+
		"open(sys.argv[1], 'a').write(str(os.getpid()) + '\\n')\n"+
		"time.sleep(1000)\n")
	tests := []struct{ name, body string }{
		{name: "env -i", body: `exec env -i sh -c '` + writePid + `; exec sleep 1000' sh "$@"`},
		{name: "process title", body: `exec python3 ` + title + ` "$2"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if tt.name == "process title" {
				if _, err := exec.LookPath("python3"); err != nil {
					t.Skip("SKIP: no python3 to set a process title with")
				}
			}
			cmd, pidFile := daemonTree(t, 2, tt.body)
			pids, alive := sweepTerm(t, cmd, pidFile, 2)
			if len(alive) > 0 {
				t.Fatalf("workers %v of %v alive when the term was given up", alive, pids)
			}
		})
	}
}

// TestSweepFindsDaemonOfInstantChild (hole 2 of issue 23): a child that
// starts a setsid daemon and exits at once may be reaped before StartChild
// returns; its daemon is still part of its tree, and Stop kills it.
func TestSweepFindsDaemonOfInstantChild(t *testing.T) {
	dir := t.TempDir()
	for i := range 100 {
		pidFile := filepath.Join(dir, strconv.Itoa(i))
		c, err := StartChild(ChildSpec{
			Path: "/bin/sh", Args: []string{"-c", "setsid sleep 1000 & echo $! > " + pidFile},
			Env: []string{"ELECTD_FENCING_TOKEN=" + strconv.Itoa(60+i)},
		}, nil)
		if err != nil {
			t.Fatal(err)
		}
		waitDone(t, c)
		ctx, cancel := context.WithTimeout(context.Background(), testDeadline)
		_, err = c.Stop(ctx)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		pids := readPids(pidFile)
		if len(pids) != 1 {
			t.Fatalf("run %d: the child wrote no daemon pid", i)
		}
		if alive := aliveOf(pids); len(alive) > 0 {
			_ = syscall.Kill(pids[0], syscall.SIGKILL)
			t.Fatalf("run %d: daemon %d of a child that exited at once survived Stop", i, pids[0])
		}
	}
}

// TestMarked: as PID 1, electd tells the tree's orphans from strangers by
// the mark in their environment; only an environment read whole and
// without the mark says "not ours"; one that reads empty is only maybe
// ours.
func TestMarked(t *testing.T) {
	const mark = "ELECTD_FENCING_TOKEN=52"
	tests := []struct {
		name string
		env  []string
		want string // sure, maybe or not
	}{
		{name: "marked", env: []string{"A=1", mark}, want: "sure"},
		{name: "another term's mark", env: []string{"ELECTD_FENCING_TOKEN=5"}, want: "not"},
		{name: "empty environment", env: []string{}, want: "maybe"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cmd := exec.Command("sleep", "1000")
			cmd.Env = tt.env
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
			// Until the exec is done the environment is the parent's.
			waitFor(t, "sleep to run", func() bool {
				b, _ := os.ReadFile("/proc/" + strconv.Itoa(cmd.Process.Pid) + "/comm")
				return string(b) == "sleep\n"
			})
			sure, maybe := marked([]int{cmd.Process.Pid}, mark)
			got := "not"
			switch {
			case len(sure) == 1:
				got = "sure"
			case len(maybe) == 1:
				got = "maybe"
			}
			if got != tt.want {
				t.Fatalf("marked: %s, want %s", got, tt.want)
			}
		})
	}
}
