package supervisor

import (
	"os"
	"syscall"
	"testing"
)

// killAtCleanup sends sigs to process pid when t ends, if it still runs
// then, through a pidfd taken now (os.FindProcess): a pid that was freed
// and reused by then is never signalled. A kill by bare pid at cleanup hit
// a stranger once, when two CI runs shared the machine and the pids
// wrapped (32768) within seconds: another run's electd died with 137.
func killAtCleanup(t testing.TB, pid int, sigs ...syscall.Signal) {
	t.Helper()
	p, err := os.FindProcess(pid)
	if err != nil {
		return // gone already
	}
	t.Cleanup(func() {
		for _, sig := range sigs {
			_ = p.Signal(sig) // os.ErrProcessDone once it has ended
		}
		_ = p.Release()
	})
}
