// Package kit is the test kit of the suites that run electd as processes
// against real store servers (test/e2e, test/lock, test/torture): the
// TestMain that builds the binaries, the table of backends and how to start
// a server of each, and the loop that runs a suite on every backend in
// parallel; an electd process with its log and HTTP API (Electd), the
// scenario that e2e's and lock's harnesses embed (Scenario), and the checks
// of the record log they share.
//
// Servers come from internal/testenv, and so does its rule for a missing
// binary: the test is skipped loudly, or fails when $CI is set.
package kit

import (
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/electd/electd/internal/testenv"
)

// Main is a suite's TestMain: it builds electd and the recorder into bin
// (see Build; name names the suite, env is the prefix of its variables),
// runs the tests and exits.
func Main(m *testing.M, name, env string, bin *Binaries) {
	os.Exit(buildAndRun(m, name, env, bin))
}

func buildAndRun(m *testing.M, name, env string, bin *Binaries) int {
	b, err := Build(name, env)
	if err != nil {
		fmt.Fprintf(os.Stderr, "%s: %v\n", name, err)
		return 1
	}
	defer b.Remove()
	*bin = *b
	return m.Run()
}

// Backend is a store kind electd supports.
type Backend struct {
	// Name is the subtest's name and the scheme of electd's --store.
	Name  string
	start func(t *testing.T) *Store
}

// Backends are every store kind, in the order the suites run them.
var Backends = []Backend{
	{Name: "etcd", start: func(t *testing.T) *Store {
		e := testenv.StartEtcd(t)
		return &Store{Name: "etcd", Addr: e.Endpoint(), Etcd: e, srv: e}
	}},
	{Name: "redis", start: func(t *testing.T) *Store {
		r := testenv.StartRedis(t)
		return &Store{Name: "redis", Addr: r.Addr(), Redis: r, srv: r}
	}},
}

// Select returns the backends named in list, comma-separated.
func Select(list string) ([]Backend, error) {
	var out []Backend
	for name := range strings.SplitSeq(list, ",") {
		name = strings.TrimSpace(name)
		found := false
		for _, b := range Backends {
			if b.Name == name {
				out, found = append(out, b), true
			}
		}
		if !found && name != "" {
			return nil, fmt.Errorf("unknown backend %q (want etcd, redis)", name)
		}
	}
	return out, nil
}

// Start starts a server of b on free loopback ports; it is killed when t
// ends. Must run on t's goroutine.
func (b Backend) Start(t *testing.T) *Store { t.Helper(); return b.start(t) }

// Store is one running server of a backend.
type Store struct {
	Name  string         // the backend's
	Addr  string         // host:port of the server
	Etcd  *testenv.Etcd  // the server when Name is "etcd", else nil
	Redis *testenv.Redis // the server when Name is "redis", else nil

	srv interface {
		Kill(t testing.TB)
		Start(t testing.TB)
	}
}

// URL is electd's --store for addr: the server itself, or a proxy to it.
func (s *Store) URL(addr string) string { return s.Name + "://" + addr }

// Kill SIGKILLs the server and waits until it is gone.
func (s *Store) Kill(t testing.TB) { t.Helper(); s.srv.Kill(t) }

// Start starts a killed server again on its address, with its data where
// the store persists it (etcd does; Redis comes back empty).
func (s *Store) Start(t testing.TB) { t.Helper(); s.srv.Start(t) }

// Run runs fn on each of bs in parallel subtests named after the backend,
// each with a server of its own. A suite's TestBackends runs its scenarios
// in fn, one after another on that one server.
func Run(t *testing.T, bs []Backend, fn func(t *testing.T, s *Store)) {
	for _, b := range bs {
		t.Run(b.Name, func(t *testing.T) {
			t.Parallel()
			fn(t, b.Start(t))
		})
	}
}
