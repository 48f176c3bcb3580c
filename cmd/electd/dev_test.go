//go:build !noembed

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDevQuiet: `electd dev` starts and stops its embedded etcd without
// error-level records or stack traces on stderr.
func TestDevQuiet(t *testing.T) {
	tests := []struct {
		name string
		args []string
	}{
		{name: "new data dir", args: []string{"dev", "--listen-client", "127.0.0.1:0"}},
		{name: "data dir reused", args: []string{"dev", "--listen-client", "127.0.0.1:0", "--data-dir", t.TempDir()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := electdCmd(ctx, t, nil, tc.args...)
			var out, errb lockedBuffer
			cmd.Stdout, cmd.Stderr = &out, &errb
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			waitLog(t, &out, "embedded etcd ready")
			time.Sleep(time.Second) // etcd's start-up goroutines log after ready
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			wantExit(t, cmd.Wait(), 0, &errb)
			for _, bad := range []string{`"level":"error"`, "stacktrace", "goroutine "} {
				if strings.Contains(errb.String(), bad) {
					t.Fatalf("stderr has %s:\n%s", bad, errb.String())
				}
			}
		})
	}
}
