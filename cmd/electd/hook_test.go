package main

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/supervisor"
)

// hookCopy is one `electd run` of the hook tests.
type hookCopy struct {
	log    *lockedBuffer
	pid    int
	wait   func() error
	signal func(syscall.Signal)
}

// startHookCopy starts `electd run` with args (after run) and more, the
// COMMAND part.
func startHookCopy(t *testing.T, args ...string) *hookCopy {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	t.Cleanup(cancel)
	cmd := electdCmd(ctx, t, nil, append([]string{"run", "--listen", "127.0.0.1:0", "--ttl", "10s", "--stop-timeout", "2s"}, args...)...)
	h := &hookCopy{log: &lockedBuffer{}}
	cmd.Stderr = h.log
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	h.pid, h.wait = cmd.Process.Pid, cmd.Wait
	h.signal = func(s syscall.Signal) {
		if err := cmd.Process.Signal(s); err != nil {
			t.Fatal(err)
		}
	}
	return h
}

// hookLine is the --on-change command that appends what the hook is told
// to file.
func hookLine(file string) string {
	return `echo "hook $ELECTD_ROLE prev=$ELECTD_PREVIOUS_ROLE leader=$ELECTD_LEADER_ID token=$ELECTD_FENCING_TOKEN id=$ELECTD_ID" >> ` + file
}

// waitLines waits until file has a line matching re and returns its lines.
func waitLines(t *testing.T, file, re string, log *lockedBuffer) []string {
	t.Helper()
	rx := regexp.MustCompile(re)
	deadline := time.Now().Add(30 * time.Second)
	for {
		b, _ := os.ReadFile(file)
		ls := strings.Split(strings.TrimSuffix(string(b), "\n"), "\n")
		for _, l := range ls {
			if rx.MatchString(l) {
				return ls
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s has no line %q within 30s:\n%s\nelectd's log:\n%s", file, re, b, log.String())
		}
		time.Sleep(10 * time.Millisecond) // polling a condition with a deadline
	}
}

// index is the index of the first line of ls matching re, or -1.
func index(ls []string, re string) int {
	rx := regexp.MustCompile(re)
	for i, l := range ls {
		if rx.MatchString(l) {
			return i
		}
	}
	return -1
}

// TestOnChangeHooks runs two copies with --on-change: the leader's hook is
// told leading with its token, the other's following with the leader's id
// and token. SIGTERM to the leader: its hook is told stopped after its
// child has stopped; the other's is told leading, with a greater token,
// after following, never the other way round; and at its own SIGTERM,
// stopped.
func TestOnChangeHooks(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	dir := t.TempDir()
	child := `f=` + dir + `/$ELECTD_ID; echo "child start token=$ELECTD_FENCING_TOKEN" >> $f; ` +
		`trap 'echo "child exit" >> $f; kill $!; exit 0' TERM; sleep 1000 & wait`
	start := func(id string) *hookCopy {
		return startHookCopy(t, "--store", store, "--election", "hooks", "--id", id, "--containment", "pgroup",
			"--on-change", hookLine(filepath.Join(dir, id)), "--shell", "--", child)
	}
	a := start("a")
	fa, fb := filepath.Join(dir, "a"), filepath.Join(dir, "b")
	// Before it leads, a copy may be told waiting (no leader yet).
	la := waitLines(t, fa, `^hook leading prev=(waiting)? leader=a token=\d+ id=a$`, a.log)
	tokA, _ := strconv.ParseUint(regexp.MustCompile(`token=(\d+) id=a$`).FindStringSubmatch(la[index(la, `^hook leading`)])[1], 10, 64)
	waitLines(t, fa, `^child start token=`+strconv.FormatUint(tokA, 10)+`$`, a.log)

	b := start("b")
	waitLines(t, fb, fmt.Sprintf(`^hook following prev=(waiting)? leader=a token=%d id=b$`, tokA), b.log)

	a.signal(syscall.SIGTERM)
	wantExit(t, a.wait(), 0, a.log)
	la = waitLines(t, fa, `^hook stopped prev=leading leader= token= id=a$`, a.log)
	if i, j := index(la, `^child exit$`), index(la, `^hook stopped`); i < 0 || j < i || j != len(la)-1 {
		t.Fatalf("the leader's hook was not told stopped last, after its child's exit:\n%s", strings.Join(la, "\n"))
	}

	lb := waitLines(t, fb, `^hook leading prev=(following|waiting) leader=b token=\d+ id=b$`, b.log)
	m := regexp.MustCompile(`^hook leading prev=\w+ leader=b token=(\d+)`).FindStringSubmatch(lb[index(lb, `^hook leading`)])
	if tokB, _ := strconv.ParseUint(m[1], 10, 64); tokB <= tokA {
		t.Fatalf("b's hook is told token %d, not above a's %d", tokB, tokA)
	}
	b.signal(syscall.SIGTERM)
	wantExit(t, b.wait(), 0, b.log)
	lb = waitLines(t, fb, `^hook stopped prev=leading `, b.log)
	var roles []string
	for _, l := range lb {
		if f := strings.Fields(l); f[0] == "hook" {
			roles = append(roles, f[1])
		}
	}
	if got := strings.TrimPrefix(strings.Join(roles, " "), "waiting "); got != "following leading stopped" && got != "following waiting leading stopped" {
		t.Fatalf("b's hook was told %q, want (waiting,) following, (waiting,) leading, stopped:\n%s", got, strings.Join(lb, "\n"))
	}
	t.Logf("a:\n%s\nb:\n%s", strings.Join(la, "\n"), strings.Join(lb, "\n"))
}

// TestOnChangeTimeoutDoesNotDelayStop: a leading hook that outlives
// --on-change-timeout does not hold up SIGTERM's stop of the child and the
// resignation; it is killed with its process group at its timeout, logged
// at WARN, and the stopped hook runs after it.
func TestOnChangeTimeoutDoesNotDelayStop(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	dir := t.TempDir()
	events, bgFile := filepath.Join(dir, "events"), filepath.Join(dir, "bg")
	const timeout = 4 * time.Second
	hook := hookLine(events) + `; if [ "$ELECTD_ROLE" = leading ]; then sleep 1000 & echo $! > ` + bgFile + `.new; mv ` +
		bgFile + `.new ` + bgFile + `; wait; fi`
	child := `trap 'echo "child exit" >> ` + events + `; kill $!; exit 0' TERM; sleep 1000 & wait`
	c := startHookCopy(t, "--store", store, "--election", "hook-timeout", "--id", "slow", "--containment", "pgroup",
		"--on-change", hook, "--on-change-timeout", timeout.String(), "--shell", "--", child)
	bg := waitPidFile(t, bgFile, c.log)
	hookStarted := time.Now() // a little after the hook began: its timeout ends before started+timeout
	waitLog(t, c.log, "child started")

	sent := time.Now()
	c.signal(syscall.SIGTERM)
	waitLines(t, events, `^child exit$`, c.log)
	stopped := time.Since(sent)
	waitLog(t, c.log, "leadership given up")
	gaveUp := time.Since(sent)
	if left := timeout - time.Since(hookStarted); left <= 0 {
		t.Fatalf("the term ended %s after SIGTERM, not before the hook's timeout (%s after it began)", gaveUp, timeout)
	}
	if strings.Contains(c.log.String(), "hook timed out") {
		t.Fatalf("the hook timed out before the term was given up:\n%s", c.log)
	}
	wantExit(t, c.wait(), 0, c.log)
	exited := time.Since(sent)
	t.Logf("after SIGTERM: child stopped %s, term given up %s, electd exited %s (hook timeout %s)",
		stopped.Round(time.Millisecond), gaveUp.Round(time.Millisecond), exited.Round(time.Millisecond), timeout)

	log := c.log.String()
	for _, want := range []string{
		`level=WARN msg="hook timed out; its process group was killed (SIGKILL)" hook=on-change role=leading`,
		`level=INFO msg="hook ran" hook=on-change role=stopped previous_role=leading`,
	} {
		if !strings.Contains(log, want) {
			t.Errorf("electd's log has no %q:\n%s", want, log)
		}
	}
	if i, j := strings.Index(log, "leadership given up"), strings.Index(log, "hook timed out"); i < 0 || j < i {
		t.Errorf("the hook timed out before the term was given up:\n%s", log)
	}
	if !procDead(bg) {
		t.Errorf("the hook's background job %d outlived its timeout and electd", bg)
	}
}

// procDead reports whether pid no longer runs: gone, or a zombie.
func procDead(pid int) bool {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return true
	}
	_, rest, _ := strings.Cut(string(b), ") ")
	return strings.HasPrefix(rest, "Z") || strings.HasPrefix(rest, "X")
}

// TestOnChangeOutsideTheChildsTree: under pidns containment the hook runs
// in electd's PID namespace, as electd's own child, in a process group of
// its own: not in the child's namespace, tree or group.
func TestOnChangeOutsideTheChildsTree(t *testing.T) {
	if _, _, err := supervisor.ResolveContainment(supervisor.ContainPidns); err != nil {
		t.Skipf("pidns containment is not available here: %v", err)
	}
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	dir := t.TempDir()
	hookFile, childFile := filepath.Join(dir, "hook"), filepath.Join(dir, "child")
	// Field 4 of /proc/self/stat is the ppid, 5 the process group.
	// The shell reads its own stat (read is a builtin; { } does not fork).
	whoami := `read pid comm state ppid pgrp rest < /proc/self/stat; echo "$(readlink /proc/self/ns/pid) $ppid $pgrp $pid"`
	c := startHookCopy(t, "--store", store, "--election", "hook-tree", "--id", "tree", "--containment", "pidns",
		"--on-change", `[ "$ELECTD_ROLE" = leading ] && { `+whoami+`; } > `+hookFile+`.new && mv `+hookFile+`.new `+hookFile,
		"--shell", "--", `{ `+whoami+`; } > `+childFile+`.new; mv `+childFile+`.new `+childFile+`; exec sleep 1000`)
	read := func(file string) []string {
		waitLines(t, file, `^pid:`, c.log)
		b, _ := os.ReadFile(file)
		return strings.Fields(string(b))
	}
	hook, child := read(hookFile), read(childFile)
	electdNS, err := os.Readlink(fmt.Sprintf("/proc/%d/ns/pid", c.pid))
	if err != nil {
		t.Fatal(err)
	}
	switch {
	case hook[0] != electdNS:
		t.Errorf("the hook is in PID namespace %s, not electd's %s", hook[0], electdNS)
	case hook[0] == child[0]:
		t.Errorf("the hook is in the child's PID namespace %s", child[0])
	case hook[1] != strconv.Itoa(c.pid):
		t.Errorf("the hook's parent is %s, not electd (%d)", hook[1], c.pid)
	case hook[2] != hook[3]:
		t.Errorf("the hook (pid %s) is in process group %s, not one of its own", hook[3], hook[2])
	}
	t.Logf("electd %d in %s; hook: %v; child (in its namespace): %v", c.pid, electdNS, hook, child)
	c.signal(syscall.SIGTERM)
	wantExit(t, c.wait(), 0, c.log)
}

// TestOnChangeSecondInterrupt: while electd waits at exit for a hook that
// hangs, a second SIGINT kills the hook's process group at once and
// electd exits without running the stopped hook.
func TestOnChangeSecondInterrupt(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	dir := t.TempDir()
	events, bgFile := filepath.Join(dir, "events"), filepath.Join(dir, "bg")
	hook := hookLine(events) + `; if [ "$ELECTD_ROLE" = leading ]; then sleep 1000 & echo $! > ` + bgFile + `.new; mv ` +
		bgFile + `.new ` + bgFile + `; wait; fi`
	c := startHookCopy(t, "--store", store, "--election", "hook-hurry", "--id", "hurry", "--containment", "pgroup",
		"--on-change", hook, "--on-change-timeout", "1m", "--", "sleep", "1000")
	bg := waitPidFile(t, bgFile, c.log)
	c.signal(syscall.SIGINT)
	waitLog(t, c.log, "leadership given up")
	sent := time.Now()
	c.signal(syscall.SIGINT)
	wantExit(t, c.wait(), 0, c.log)
	if took := time.Since(sent); took > 10*time.Second {
		t.Errorf("electd exited %s after the second SIGINT", took)
	}
	t.Logf("exited %s after the second SIGINT", time.Since(sent).Round(time.Millisecond))
	if !procDead(bg) {
		t.Errorf("the hook's background job %d outlived electd", bg)
	}
	if ls := waitLines(t, events, `^hook leading`, c.log); index(ls, `^hook stopped`) >= 0 {
		t.Errorf("the stopped hook ran after the second SIGINT:\n%s", strings.Join(ls, "\n"))
	}
	if !strings.Contains(c.log.String(), `msg="hook not run: electd stops at once (a second interrupt)"`) {
		t.Errorf("electd's log does not say the stopped hook was not run:\n%s", c.log)
	}
}
