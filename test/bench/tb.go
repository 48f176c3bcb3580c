package main

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sync"
	"testing"
)

// benchTB lets the benchmark use internal/testenv, whose constructors take
// a testing.TB, outside `go test`. Fatalf (and Skipf) panics with a
// tbFatal that withTB recovers into an error, so, as under `go test`,
// they must be called on the goroutine that runs withTB's f; Errorf only
// records. Cleanups run, last first, when withTB returns. Any testing.TB
// method testenv does not use panics (nil embedded interface).
type benchTB struct {
	testing.TB // nil: only the methods below are implemented

	name string
	dir  string // parent of TempDir's directories
	ctx  context.Context

	mu       sync.Mutex
	cleanups []func()
	errs     []string
}

type tbFatal struct{ msg string }

// withTB runs f with a benchTB named name, then its cleanups; a Fatalf in
// f, or an Errorf before it returned, is the error.
func withTB(ctx context.Context, name, dir string, f func(t *benchTB) error) (err error) {
	t := &benchTB{name: name, dir: dir, ctx: ctx}
	defer func() {
		t.runCleanups()
		if err == nil && len(t.errs) > 0 {
			err = errors.New(t.errs[0])
		}
	}()
	defer func() {
		if r := recover(); r != nil {
			f, ok := r.(tbFatal)
			if !ok {
				panic(r)
			}
			err = errors.New(f.msg)
		}
	}()
	return f(t)
}

func (t *benchTB) runCleanups() {
	for {
		t.mu.Lock()
		if len(t.cleanups) == 0 {
			t.mu.Unlock()
			return
		}
		f := t.cleanups[len(t.cleanups)-1]
		t.cleanups = t.cleanups[:len(t.cleanups)-1]
		t.mu.Unlock()
		func() {
			defer func() {
				if r := recover(); r != nil {
					if f, ok := r.(tbFatal); ok {
						logf("%s: cleanup: %s", t.name, f.msg)
						return
					}
					panic(r)
				}
			}()
			f()
		}()
	}
}

func (t *benchTB) Helper()                  {}
func (t *benchTB) Name() string             { return t.name }
func (t *benchTB) Context() context.Context { return t.ctx }

func (t *benchTB) Cleanup(f func()) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.cleanups = append(t.cleanups, f)
}

func (t *benchTB) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "testenv-")
	if err != nil {
		t.Fatalf("TempDir: %v", err)
	}
	return d // under the benchmark's directory: removed with it
}

func (t *benchTB) Logf(format string, args ...any) {
	logf("%s: %s", t.name, fmt.Sprintf(format, args...))
}
func (t *benchTB) Log(args ...any) { t.Logf("%s", fmt.Sprint(args...)) }

func (t *benchTB) Errorf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.errs = append(t.errs, msg)
	t.mu.Unlock()
	t.Logf("%s", msg)
}
func (t *benchTB) Error(args ...any) { t.Errorf("%s", fmt.Sprint(args...)) }

func (t *benchTB) Failed() bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.errs) > 0
}

func (t *benchTB) Fatalf(format string, args ...any) {
	msg := fmt.Sprintf(format, args...)
	t.mu.Lock()
	t.errs = append(t.errs, msg)
	t.mu.Unlock()
	panic(tbFatal{msg})
}
func (t *benchTB) Fatal(args ...any) { t.Fatalf("%s", fmt.Sprint(args...)) }
func (t *benchTB) FailNow()          { t.Fatalf("FailNow") }
func (t *benchTB) Skipf(format string, args ...any) {
	t.Fatalf("skipped: "+format, args...) // a missing redis-server is a failure here
}
