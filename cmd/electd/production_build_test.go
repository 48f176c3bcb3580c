package main

import (
	"context"
	"debug/elf"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/release"
)

// TestProductionBuild builds electd as the Dockerfile does
// (internal/release: without the embedded etcd, static, stripped) and
// checks that it runs, and that demo and dev refuse with a message saying
// why, leaving nothing behind.
func TestProductionBuild(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a binary")
	}
	goTool, err := exec.LookPath("go")
	if err != nil {
		goTool = filepath.Join(runtime.GOROOT(), "bin", "go")
	}
	dir := t.TempDir()
	exe := filepath.Join(dir, "electd")
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	args := release.BuildArgs(exe, ".", "")
	build := exec.CommandContext(ctx, goTool, args...)
	build.Env = append(os.Environ(), release.Env...)
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	// Static (CGO_ENABLED=0): no program interpreter, no libc.
	f, err := elf.Open(exe)
	if err != nil {
		t.Fatal(err)
	}
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			t.Errorf("the production build is dynamically linked: build it with %s", strings.Join(release.Env, " "))
		}
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	tmp := t.TempDir() // demo and dev create their data directories here
	tests := []struct {
		name     string
		args     []string
		wantCode int
		wantErr  string
	}{
		{name: "version", args: []string{"version"}},
		{name: "demo", args: []string{"demo"}, wantCode: 1, wantErr: "built with -tags noembed"},
		{name: "dev", args: []string{"dev", "--listen-client", "127.0.0.1:0"}, wantCode: 1, wantErr: "built with -tags noembed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, exe, tt.args...)
			cmd.Env = append(os.Environ(), "TMPDIR="+tmp)
			var stderr strings.Builder
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			if ee := (*exec.ExitError)(nil); errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatalf("run: %v", err)
			}
			if code != tt.wantCode || !strings.Contains(stderr.String(), tt.wantErr) {
				t.Fatalf("exit %d, stderr %q; want exit %d and %q", code, stderr.String(), tt.wantCode, tt.wantErr)
			}
		})
	}
	left, err := os.ReadDir(tmp)
	if err != nil {
		t.Fatal(err)
	}
	if len(left) != 0 {
		t.Errorf("demo or dev left %d entries in TMPDIR, e.g. %s", len(left), left[0].Name())
	}
}
