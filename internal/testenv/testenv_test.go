package testenv

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
)

func TestFreePort(t *testing.T) {
	port := FreePort(t)
	ln, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatalf("listen on the free port %d: %v", port, err)
	}
	_ = ln.Close()
	// Out of the ephemeral range, where outgoing connections take ports:
	// a member restarting on its port must find it free.
	elo, ehi, err := ephemeralRange()
	if errors.Is(err, os.ErrNotExist) {
		t.Skipf("no ephemeral range to check against: %v", err)
	}
	if err != nil {
		t.Fatal(err)
	}
	for range 50 {
		if p := FreePort(t); p >= elo && p <= ehi {
			t.Fatalf("FreePort gave %d, in the ephemeral range [%d, %d]", p, elo, ehi)
		}
	}
}

func TestModuleRoot(t *testing.T) {
	root, err := ModuleRoot()
	if err != nil {
		t.Fatalf("module root: %v", err)
	}
	mod, err := os.ReadFile(filepath.Join(root, "go.mod"))
	if err != nil {
		t.Fatalf("read go.mod: %v", err)
	}
	if !strings.Contains(string(mod), "module github.com/electd/electd") {
		t.Fatalf("%s/go.mod is not electd's", root)
	}
}

// fakeTB records how a helper ended the test; Fatalf and Skipf end the
// goroutine like the real ones.
type fakeTB struct {
	testing.TB
	mu      sync.Mutex
	fatal   string
	skipped string
}

func (f *fakeTB) Helper()             {}
func (f *fakeTB) Logf(string, ...any) {}
func (f *fakeTB) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeTB) Skipf(format string, args ...any) {
	f.mu.Lock()
	f.skipped = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

// runFake runs fn with a fakeTB on its own goroutine, as the testing package would.
func runFake(fn func(testing.TB)) *fakeTB {
	f := &fakeTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	return f
}

func TestMissingBinary(t *testing.T) {
	t.Setenv("PATH", t.TempDir())
	t.Setenv("ELECTD_REDIS_SERVER", "")
	t.Setenv("ELECTD_ETCD_BIN", "") // `make test` sets it

	t.Setenv("CI", "")
	f := runFake(func(tb testing.TB) { binary(tb, "ELECTD_REDIS_SERVER", "redis-server", nil, redisHow) })
	if f.fatal != "" || !strings.Contains(f.skipped, "apt-get install -y redis-server") {
		t.Errorf("without CI: fatal=%q skipped=%q, want a skip naming apt-get", f.fatal, f.skipped)
	}

	t.Setenv("CI", "true")
	f = runFake(func(tb testing.TB) { binary(tb, "ELECTD_ETCD_BIN", "etcd", nil, etcdHow) })
	if !strings.Contains(f.fatal, "make etcd") || !strings.Contains(f.fatal, "go build -o bin/etcd") {
		t.Errorf("with CI: fatal=%q skipped=%q, want a failure naming make etcd", f.fatal, f.skipped)
	}

	t.Setenv("CI", "")
	t.Setenv("ELECTD_ETCD_BIN", filepath.Join(t.TempDir(), "no-such-etcd"))
	f = runFake(func(tb testing.TB) { binary(tb, "ELECTD_ETCD_BIN", "etcd", nil, etcdHow) })
	if !strings.Contains(f.fatal, "no-such-etcd") {
		t.Errorf("bad $ELECTD_ETCD_BIN: fatal=%q skipped=%q, want a failure naming the file", f.fatal, f.skipped)
	}
}
