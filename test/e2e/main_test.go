package e2e

import (
	"fmt"
	"os"
	"testing"

	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/test/proc"
)

// Paths of the binaries built by TestMain.
var (
	electdBin   string
	recorderBin string
)

func TestMain(m *testing.M) {
	os.Exit(buildAndRun(m))
}

func buildAndRun(m *testing.M) int {
	b, err := proc.Build("e2e", "E2E")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer b.Remove()
	electdBin, recorderBin = b.Electd, b.Recorder
	return m.Run()
}

// backend is a store kind: how to start a server and how electd names it.
type backend struct {
	name   string
	scheme string                              // of --store
	start  func(t *testing.T) (server, string) // starts a server, returns it and host:port
}

// server is a running store server (testenv.Etcd, testenv.Redis).
type server interface {
	Kill(t testing.TB)
	Start(t testing.TB)
}

var backends = []backend{
	{name: "etcd", scheme: "etcd", start: func(t *testing.T) (server, string) {
		e := testenv.StartEtcd(t)
		return e, e.Endpoint()
	}},
	{name: "redis", scheme: "redis", start: func(t *testing.T) (server, string) {
		r := testenv.StartRedis(t)
		return r, r.Addr()
	}},
}

// scenarios run, one after another, against each backend's one server;
// each has its own election and record log.
var scenarios = []struct {
	name string
	run  func(t *testing.T, s *store)
}{
	{"ThreeCopies", testThreeCopies},
	{"SIGTERMLeader", testSIGTERMLeader},
	{"Kill9Leader", testKill9Leader},
	{"CutOffLeader", testCutOffLeader},
	{"ResignEndpoint", testResignEndpoint},
	{"OnExit", testOnExit},
	{"StopTimeout", testStopTimeout},
	{"Grandchildren", testGrandchildren},
	{"Environment", testEnvironment},
	{"LeaderSince", testLeaderSince},
	{"TreeMainKilled", testTreeMainKilled},
	{"TreeKill9", testTreeKill9},
	{"TreeIgnoresTerm", testTreeIgnoresTerm},
	{"ContainmentRefused", testContainmentRefused},
	{"StoreRestart", testStoreRestart}, // last: Redis comes back empty
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := &store{backend: b}
			s.srv, s.addr = b.start(t)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
			}
		})
	}
}

// store is one running server of a backend.
type store struct {
	backend
	srv  server
	addr string
}

// url is the --store value for addr (the server itself, or a proxy to it).
func (s *store) url(addr string) string { return s.scheme + "://" + addr }
