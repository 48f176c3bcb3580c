package zk_test

import (
	"strings"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/testenv"
)

// harness runs the suites on a standalone server or a 3-server ensemble.
type harness struct {
	single   *testenv.ZK
	ensemble *testenv.ZKEnsemble
}

func (h *harness) Addr() string {
	if h.single != nil {
		return h.single.Addr()
	}
	return h.ensemble.Members()[0].Addr()
}

// addrs are every server's address.
func (h *harness) addrs() []string {
	if h.single != nil {
		return []string{h.single.Addr()}
	}
	return h.ensemble.Addrs()
}

func (h *harness) Restart(t testing.TB) {
	if h.single != nil {
		h.single.Kill(t)
		h.single.Start(t)
		return
	}
	h.ensemble.Restart(t)
}

// New dials the whole store, or the one address given (a fault proxy).
func (h *harness) New(t testing.TB, c electortest.Candidate) elector.Locker {
	t.Helper()
	hosts := c.StoreAddr
	if hosts == h.Addr() {
		hosts = strings.Join(h.addrs(), ",")
	}
	return electortest.DialURL(t, zk.Backend, "zk://"+hosts, c.Candidate)
}

// Queued counts the election's candidate nodes, read with a client of its own.
func (h *harness) Queued(t testing.TB, election string) int {
	t.Helper()
	c := client(t, h.addrs())
	names, _, err := c.Children("/electd/elections/" + election)
	if err == gozk.ErrNoNode {
		return 0
	}
	if err != nil {
		t.Fatalf("list the election's nodes: %v", err)
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, "_c_") {
			n++
		}
	}
	return n
}

// client is a plain go-zookeeper client, closed when the test ends.
func client(t testing.TB, addrs []string) *gozk.Conn {
	t.Helper()
	c, _, err := gozk.Connect(addrs, 4*time.Second, gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("connect to %v: %v", addrs, err)
	}
	t.Cleanup(c.Close)
	return c
}

type quiet struct{}

func (quiet) Printf(string, ...any) {}

func TestZKConformance(t *testing.T) {
	electortest.Run(t, &harness{single: testenv.StartZK(t)})
}

func TestZKLockSuite(t *testing.T) {
	electortest.RunLock(t, &harness{single: testenv.StartZK(t)})
}

func TestZKEnsembleConformance(t *testing.T) {
	electortest.Run(t, &harness{ensemble: testenv.StartZKEnsemble(t)})
}

func TestZKEnsembleLockSuite(t *testing.T) {
	electortest.RunLock(t, &harness{ensemble: testenv.StartZKEnsemble(t)})
}
