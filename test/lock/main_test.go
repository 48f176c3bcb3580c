package lock

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/internal/testenv"
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
	dir, err := os.MkdirTemp("", "electd-lock-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := testenv.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "lock:", err)
		return 1
	}
	electdBin, recorderBin = filepath.Join(dir, "electd"), filepath.Join(dir, "recorder")
	builds := []struct{ out, pkg string }{
		{electdBin, "./cmd/electd"},
		{recorderBin, "./test/recorder"},
	}
	if bin := os.Getenv("E2E_ELECTD_BIN"); bin != "" {
		if electdBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "lock: $E2E_ELECTD_BIN:", err)
			return 1
		}
		builds = builds[1:]
	}
	for _, b := range builds {
		args := []string{"build", "-o", b.out, b.pkg}
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "lock: go %v: %v\n%s", args, err, out)
			return 1
		}
	}
	return m.Run()
}

// goTool is the go command: from PATH, else from GOROOT.
func goTool() string {
	if p, err := exec.LookPath("go"); err == nil {
		return p
	}
	if root := os.Getenv("GOROOT"); root != "" {
		return filepath.Join(root, "bin", "go")
	}
	return "go"
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
