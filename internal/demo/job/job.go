// Package job is the job that `electd demo`'s sidecars run (`electd
// demo-job`): it reports its start and its stop, each with its fencing
// token, the time and its host pid, on stdout, and stops on SIGTERM or
// SIGINT.
//
// The demo times a handover to the job's start line, so the job starts as
// fast as the binary allows: this package imports only the standard
// library and takes over in its init function (as the namespace init,
// supervisor/internal/nsinit, does), before electd's larger dependencies
// run theirs: 4–7 ms from a shell's fork to the start line here, against
// 11–12 ms as a command of electd's CLI (the default build, 5 runs each).
package job

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"
)

// Arg is the job's argv[1].
const Arg = "demo-job"

func init() {
	if len(os.Args) == 2 && os.Args[1] == Arg {
		os.Exit(Main())
	}
}

// Main runs the job until SIGTERM or SIGINT and returns its exit code.
func Main() int {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	id, token := os.Getenv("ELECTD_ID"), os.Getenv("ELECTD_FENCING_TOKEN")
	if _, err := fmt.Printf("demo-job start %s %s %d %d\n", id, token, time.Now().UnixNano(), hostPid()); err != nil {
		fmt.Fprintln(os.Stderr, "demo-job:", err)
		return 1
	}
	<-stop
	if _, err := fmt.Printf("demo-job stop %s %s %d %d\n", id, token, time.Now().UnixNano(), hostPid()); err != nil {
		fmt.Fprintln(os.Stderr, "demo-job:", err)
		return 1
	}
	return 0
}

// hostPid is this process's pid as the demo (outside the job's PID
// namespace, when electd contains it in one) sees it: /proc is the host's
// mount, so /proc/self names us by that pid, while getpid answers with the
// namespace's.
func hostPid() int {
	if s, err := os.Readlink("/proc/self"); err == nil {
		if pid, err := strconv.Atoi(s); err == nil {
			return pid
		}
	}
	return os.Getpid()
}
