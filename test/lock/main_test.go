package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
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
	// lastRun reads the --once-per run record of election directly (nil
	// when there is none).
	lastRun func(t *testing.T, election string) *runRecord
}

// runRecord is the --once-per run record as the store holds it (JSON).
type runRecord struct {
	ID       string    `json:"id"`
	Token    uint64    `json:"fencing_token"`
	Finished time.Time `json:"finished"`
}

// decodeRun decodes a run record read from the store.
func decodeRun(t *testing.T, b []byte) *runRecord {
	t.Helper()
	var r runRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("run record %q: %v", b, err)
	}
	return &r
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
			},
			lastRun: func(t *testing.T, election string) *runRecord {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				resp, err := cli.Get(ctx, "/electd/runs/"+election)
				if err != nil {
					t.Fatalf("read the run record: %v", err)
				}
				if len(resp.Kvs) == 0 {
					return nil
				}
				return decodeRun(t, resp.Kvs[0].Value)
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
			},
			lastRun: func(t *testing.T, election string) *runRecord {
				t.Helper()
				ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
				defer cancel()
				b, err := cli.Get(ctx, "electd:{"+election+"}:lastrun").Bytes()
				if errors.Is(err, redis.Nil) {
					return nil
				}
				if err != nil {
					t.Fatalf("read the run record: %v", err)
				}
				return decodeRun(t, b)
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
	{"TreeMainKilled", testTreeMainKilled},
	{"ContainmentRefused", testContainmentRefused},
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
