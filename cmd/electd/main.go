// Command electd is a leader-election sidecar and process supervisor: the
// copy that wins an election in etcd or Redis runs the wrapped command (or
// reports ready), and stops it before its lease can lapse.
package main

import (
	"context"
	"os"

	// `electd demo-job`, the demo's job, runs from this package's init
	// function, before electd's dependencies start (see its doc).
	_ "github.com/electd/electd/internal/demo/job"
)

func main() {
	hideProcess(os.Stderr)
	os.Exit(exitCode(run(context.Background(), os.Args), os.Stderr))
}
