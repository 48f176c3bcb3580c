package testenv

import (
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

func zkClient(t *testing.T, addrs ...string) *zk.Conn {
	t.Helper()
	c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestZKKillStartKeepsData: a standalone server killed and started again
// serves on the same port with its data.
func TestZKKillStartKeepsData(t *testing.T) {
	z := StartZK(t)
	if m := z.Mode(); m != "standalone" {
		t.Fatalf("mode %q, want standalone", m)
	}
	c := zkClient(t, z.Addr())
	if _, err := c.Create("/kept", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	z.Kill(t)
	if z.Pid() != 0 || z.Mode() != "" {
		t.Fatalf("killed server still answers (pid %d, mode %q)", z.Pid(), z.Mode())
	}
	z.Start(t)
	b, _, err := zkClient(t, z.Addr()).Get("/kept")
	if err != nil || string(b) != "v" {
		t.Fatalf("after the restart: %q, %v; want the node kept", b, err)
	}
}

// TestZKEnsembleLeaderKillStart: a 3-server ensemble has one leader; killed,
// the other two elect another; started again, it rejoins on its data, and
// a whole-ensemble restart keeps the data.
func TestZKEnsembleLeaderKillStart(t *testing.T) {
	e := StartZKEnsemble(t)
	lead := e.Leader(t)
	c := zkClient(t, e.Addrs()...)
	if _, err := c.Create("/kept", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	lead.Kill(t)
	if next := e.Leader(t); next == lead {
		t.Fatal("the killed member still leads")
	}
	lead.Start(t)
	if m := lead.Mode(); m != "follower" && m != "leader" {
		t.Fatalf("restarted member's mode %q", m)
	}
	e.Restart(t)
	b, _, err := zkClient(t, e.Addrs()...).Get("/kept")
	if err != nil || string(b) != "v" {
		t.Fatalf("after the ensemble's restart: %q, %v; want the node kept", b, err)
	}
}
