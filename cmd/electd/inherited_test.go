package main

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestInheritedChildSpared: with an entry point like `agent & exec electd
// lock …`, electd inherits a child it did not start. The agent's setsid'd
// daemon, orphaned to electd (a subreaper) while the command runs, is not
// the command's: it outlives the lock. The command's own setsid'd daemon
// does not. electd says at start why it looks for the command's mark.
func TestInheritedChildSpared(t *testing.T) {
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	dir := t.TempDir()
	started, agentPid, childPid := filepath.Join(dir, "started"), filepath.Join(dir, "agent-daemon"), filepath.Join(dir, "child-daemon")
	daemon := "setsid sleep 1000 </dev/null >/dev/null 2>&1 & echo $! > "
	// The agent starts its daemon once the command runs, and exits: the
	// daemon is orphaned to electd.
	agent := fmt.Sprintf("while [ ! -e %s ]; do sleep 0.01; done; %s%s", started, daemon, agentPid)
	// The command starts its own daemon, then waits until the agent's is
	// electd's ($PPID: under pgroup electd is the command's parent).
	child := fmt.Sprintf(`%s%s; touch %s
while :; do
	d=$(cat %s 2>/dev/null) && [ -n "$d" ] && [ "$(awk '{print $4}' /proc/$d/stat)" = "$PPID" ] && break
	sleep 0.01
done`, daemon, childPid, started, agentPid)
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "sh", "-c", `{ `+agent+`; } & exec "$0" lock --store "$1" --containment pgroup --shell inherited -- "$2"`, exe, store, child)
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	t.Cleanup(func() {
		for _, f := range []string{agentPid, childPid} {
			if pid := readPid(f); pid > 0 {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		}
	})
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("electd lock: %v\n%s", err, out)
	}
	if pid := readPid(childPid); pid <= 0 || alive(pid) {
		t.Errorf("the command's own daemon (pid %d) outlived the lock\n%s", pid, out)
	}
	if pid := readPid(agentPid); pid <= 0 || !alive(pid) {
		t.Errorf("the inherited agent's daemon (pid %d) was killed with the command's tree\n%s", pid, out)
	}
	if !strings.Contains(string(out), "inherited 1 child process") {
		t.Errorf("electd did not say it inherited a child:\n%s", out)
	}
}

// readPid reads a pid written to file, or 0.
func readPid(file string) int {
	b, err := os.ReadFile(file)
	if err != nil {
		return 0
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0
	}
	return pid
}

// alive reports whether pid runs (a zombie does not).
func alive(pid int) bool {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return false
	}
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	return i >= 0 && i+2 < len(s) && s[i+2] != 'Z' && s[i+2] != 'X'
}

// TestPID1Reported: as PID 1 of its own PID namespace (a container's entry
// point), electd under pgroup says that the kernel kills the tree with it,
// and that the sweep knows the child's orphans by their mark.
func TestPID1Reported(t *testing.T) {
	unshare, err := exec.LookPath("unshare")
	if err != nil || os.Getuid() != 0 {
		t.Skip("SKIP: needs root and unshare to run electd as PID 1")
	}
	store := "etcd://" + testenv.StartEtcd(t).Endpoint()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, unshare, "--pid", "--fork", "--mount-proc", exe,
		"lock", "--store", store, "--containment", "pgroup", "pid1", "--", "true")
	cmd.Env = append(os.Environ(), asMainEnv+"=1")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("electd lock as PID 1: %v\n%s", err, out)
	}
	for _, want := range []string{"PID 1 of its PID namespace, so the kernel kills the whole tree with it", "electd runs as PID 1"} {
		if !strings.Contains(string(out), want) {
			t.Errorf("electd as PID 1 did not say %q:\n%s", want, out)
		}
	}
}
