package main

import (
	"fmt"
	"io"

	sysunix "golang.org/x/sys/unix" // not unix: a test of this package has a func unix
)

// hideProcess makes electd not dumpable, first thing in main: then
// /proc/<electd>/environ, mem, maps and fd belong to root and processes of
// electd's own user cannot read them (the child among them), nor ptrace
// electd, so they cannot read $ELECTD_STORE_PASSWORD, $ELECTD_ADMIN_TOKEN
// or a password read from a file. What it costs: electd leaves no core
// dump. The child is not affected: execve makes it dumpable again, and
// electd still reads the child's /proc files (their owner is the child's).
// The pidns init (a re-execution of this binary) never reaches main and
// holds no secret.
func hideProcess(stderr io.Writer) {
	if err := sysunix.Prctl(sysunix.PR_SET_DUMPABLE, 0, 0, 0, 0); err != nil {
		fmt.Fprintf(stderr, "electd: warning: cannot make electd non-dumpable (prctl PR_SET_DUMPABLE): %v; "+
			"processes of its user can read its environment in /proc\n", err)
	}
}
