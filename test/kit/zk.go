package kit

import (
	"encoding/json"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/internal/testenv"
)

// ZK is the ZooKeeper entry: one standalone server (testenv.StartZK),
// electd's --store zk://HOST:PORT. kit.go lists it in Backends.
var ZK = Backend{Name: "zk", start: func(t *testing.T) *Store {
	z := testenv.StartZK(t)
	return &Store{Name: "zk", Servers: newZK(t, z, []string{z.Addr()})}
}}

// ZKEnsemble is a three-server ZooKeeper ensemble
// (testenv.StartZKEnsemble), electd's --store zk://H1,H2,H3; Kill and
// Start act on every member. kit.go lists it in Topologies.
var ZKEnsemble = Backend{Name: "zk-ensemble", start: func(t *testing.T) *Store {
	e := testenv.StartZKEnsemble(t)
	return &Store{Name: "zk-ensemble", Kills: "every member", Servers: newZK(t, e, e.Addrs())}
}}

// zkServers are a ZooKeeper store, read through a go-zookeeper client of
// its own. Its client dials only the hosts of its URL, so one proxy in
// front of each cuts an electd off.
type zkServers struct {
	servers
	addrs []string
	once  sync.Once
	cli   *zk.Conn
	err   error
}

func newZK(t testing.TB, srv lifecycle, addrs []string) *zkServers {
	return &zkServers{addrs: addrs, servers: servers{value: srv, srv: srv, scheme: "zk",
		url: "zk://" + strings.Join(addrs, ","), reach: Reach{Addrs: addrs}, t: t}}
}

type quietZK struct{}

func (quietZK) Printf(string, ...any) {}

// client is the kit's client, made on first use, closed when the entry's
// test ends.
func (s *zkServers) client(t testing.TB) *zk.Conn {
	t.Helper()
	s.once.Do(func() {
		s.cli, _, s.err = zk.Connect(s.addrs, 10*time.Second, zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
		if s.err == nil {
			s.t.Cleanup(s.cli.Close)
		}
	})
	if s.err != nil {
		t.Fatalf("connect to zookeeper %v: %v", s.addrs, s.err)
	}
	return s.cli
}

// Queued counts the election's candidate nodes (electd's protected
// ephemeral sequential nodes, named _c_GUID-c-SEQ).
func (s *zkServers) Queued(t testing.TB, election string) int {
	t.Helper()
	names, _, err := s.client(t).Children("/electd/elections/" + election)
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return 0
	case err != nil:
		t.Fatalf("count candidates: %v", err)
	}
	n := 0
	for _, name := range names {
		if strings.HasPrefix(name, "_c_") {
			n++
		}
	}
	return n
}

// LastRun reads the election's run node (NAME/run): the record, beside
// the instant it lapses.
func (s *zkServers) LastRun(t testing.TB, election string) *RunRecord {
	t.Helper()
	b, _, err := s.client(t).Get("/electd/elections/" + election + "/run")
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nil
	case err != nil:
		t.Fatalf("read the run record: %v", err)
	}
	var node struct {
		Run   json.RawMessage `json:"run"`
		Lapse time.Time       `json:"lapse"`
	}
	if err := json.Unmarshal(b, &node); err != nil {
		t.Fatalf("run node %q: %v", b, err)
	}
	if !time.Now().Before(node.Lapse) {
		return nil
	}
	return decodeRun(t, node.Run)
}
