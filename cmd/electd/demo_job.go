package main

import (
	"fmt"
	"os"
	"os/signal"
	"strconv"
	"syscall"
	"time"

	"github.com/urfave/cli/v2"
)

// demoJobCommand is the small job the demo's sidecars run: it reports its
// start and stop, with its fencing token, on stdout.
// demoJobAction is the job run by `electd demo`: it reports its start
// and stop.
func demoJobAction(c *cli.Context) error {
	ctx, stop := signal.NotifyContext(c.Context, syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	id, token := os.Getenv("ELECTD_ID"), os.Getenv("ELECTD_FENCING_TOKEN")
	if _, err := fmt.Fprintf(c.App.Writer, "demo-job start %s %s %d %d\n", id, token, time.Now().UnixNano(), hostPid()); err != nil {
		return err
	}
	<-ctx.Done()
	_, err := fmt.Fprintf(c.App.Writer, "demo-job stop %s %s %d %d\n", id, token, time.Now().UnixNano(), hostPid())
	return err
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
