// Command testchild is a helper for the supervisor tests: it starts
// "sleep 1000" with supervisor.StartChild, prints the sleep's pid, and
// blocks until it is killed. The tests kill it with SIGKILL and check that
// Pdeathsig took the sleep down with it.
//
// With the argument "churn" it first makes the Go runtime retire a number
// of OS threads (goroutines that exit while locked to their thread), which
// must not kill the child: only the forking thread's exit would, and that
// thread stays locked until the child is reaped.
package main

import (
	"fmt"
	"os"

	"github.com/electd/electd/internal/deathsig/deathsigtest"
	"github.com/electd/electd/supervisor"
)

func main() {
	c, err := supervisor.StartChild(supervisor.ChildSpec{
		Path: "sleep",
		Args: []string{"1000"},
	}, nil)
	if err != nil {
		fmt.Fprintln(os.Stderr, "testchild:", err)
		os.Exit(1)
	}
	if len(os.Args) > 1 && os.Args[1] == "churn" {
		deathsigtest.RetireThreads(32)
	}
	fmt.Println(c.Pid())
	<-c.Done()
	fmt.Fprintln(os.Stderr, "testchild: child exited:", c.Exit().ExitCode())
	os.Exit(1)
}
