package supervisor

import (
	"context"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
)

// Tests of pgroup's sweep: the orphans of the child's tree, reparented to
// electd (a subreaper), are found and killed, whatever they do to their
// environment and however fast the child exits.

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
