package e2e

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"

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
	dir, err := os.MkdirTemp("", "electd-e2e-bin-")
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	defer os.RemoveAll(dir)
	root, err := testenv.ModuleRoot()
	if err != nil {
		fmt.Fprintln(os.Stderr, "e2e:", err)
		return 1
	}
	electdBin, recorderBin = filepath.Join(dir, "electd"), filepath.Join(dir, "recorder")
	var electdFlags []string
	if os.Getenv("E2E_ELECTD_RACE") == "1" {
		electdFlags = append(electdFlags, "-race")
	}
	builds := []struct {
		out, pkg string
		flags    []string
	}{
		{electdBin, "./cmd/electd", electdFlags},
		{recorderBin, "./test/recorder", nil},
	}
	if bin := os.Getenv("E2E_ELECTD_BIN"); bin != "" {
		if electdBin, err = filepath.Abs(bin); err != nil {
			fmt.Fprintln(os.Stderr, "e2e: $E2E_ELECTD_BIN:", err)
			return 1
		}
		builds = builds[1:]
	}
	for _, b := range builds {
		args := append(append([]string{"build"}, b.flags...), "-o", b.out, b.pkg)
		cmd := exec.Command(goTool(), args...)
		cmd.Dir = root
		if out, err := cmd.CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "e2e: go %v: %v\n%s", args, err, out)
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
