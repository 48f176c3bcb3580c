package lock

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/testenv"
	pidwatch "github.com/electd/electd/test/proc"
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
	b, err := pidwatch.Build("lock", "E2E")
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock:", err)
		return 1
	}
	defer b.Remove()
	electdBin, recorderBin = b.Electd, b.Recorder
	return m.Run()
}

// store is one running server of a backend.
type store struct {
	name   string
	addr   string                                  // host:port of the server
	url    func(addr string) string                // --store for addr (the server or a proxy)
	queued func(t *testing.T, election string) int // candidates the store holds, read directly
}

// backends start a server each and say how to read it directly.
var backends = []struct {
	name  string
	start func(t *testing.T) *store
}{
	{"etcd", func(t *testing.T) *store {
		srv := testenv.StartEtcd(t)
		cli := srv.Client(t)
		return &store{name: "etcd", addr: srv.Endpoint(),
			url: func(a string) string { return "etcd://" + a },
			queued: func(t *testing.T, election string) int {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				resp, err := cli.Get(ctx, "/electd/elections/"+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
				if err != nil {
					t.Fatalf("count candidates: %v", err)
				}
				return int(resp.Count)
			}}
	}},
	{"redis", func(t *testing.T) *store {
		srv := testenv.StartRedis(t)
		cli := srv.Client(t)
		return &store{name: "redis", addr: srv.Addr(),
			url: func(a string) string { return "redis://" + a },
			queued: func(t *testing.T, election string) int {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				n, err := cli.ZCard(ctx, "electd:{"+election+"}:queue").Result()
				if err != nil {
					t.Fatalf("count candidates: %v", err)
				}
				return int(n)
			}}
	}},
}

// scenarios run, one after another, against each backend's one server;
// each has its own lock name and record log.
var scenarios = []struct {
	name string
	run  func(t *testing.T, s *store)
}{
	{"MutualExclusion", testMutualExclusion},
	{"Handover", testHandover},
	{"Busy", testBusy},
	{"SignalsLeaveNothing", testSignals},
	{"ExitCodes", testExitCodes},
	{"LostLockStopsCommand", testLostLock},
	{"Slots", testSlots},
	{"SlotsMismatch", testSlotsMismatch},
	{"OncePer", testOncePer},
	{"OncePerFailedRunRetries", testOncePerRetry},
	{"LeaderWatch", testLeaderWatch},
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	for _, b := range backends {
		t.Run(b.name, func(t *testing.T) {
			t.Parallel()
			s := b.start(t)
			for _, sc := range scenarios {
				t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
			}
		})
	}
}
