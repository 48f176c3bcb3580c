// Command electd is a leader-election sidecar and process supervisor: the
// copy that wins an election in etcd or Redis runs the wrapped command (or
// reports ready), and stops it before its lease can lapse.
package main

import (
	"context"
	"os"
	"runtime"

	// `electd demo-job`, the demo's job, runs from this package's init
	// function, before electd's dependencies start (see its doc).
	_ "github.com/electd/electd/internal/demo/job"
)

func main() {
	// electd serves no profiles: sampling its allocations (one sample per
	// 512 KB, a stack walk and a bucket each) would only cost an idle copy
	// pages of the profiler's hash table.
	runtime.MemProfileRate = 0
	hideProcess(os.Stderr)
	os.Exit(exitCode(run(context.Background(), os.Args), os.Stderr))
}
