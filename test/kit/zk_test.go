package kit

import (
	"errors"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkAcrossRestart: a node the kit's client wrote is read back after every
// member was killed and started again on its data.
func zkAcrossRestart(t *testing.T, s *Store, srv *zkServers) {
	cli := srv.client(t)
	if _, err := cli.Create("/kit-k", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil && !errors.Is(err, zk.ErrNodeExists) {
		t.Fatalf("create: %v", err)
	}
	s.Kill(t)
	s.Start(t)
	// The client's connection died with the members: it reconnects by
	// itself, in its own time.
	var got []byte
	var err error
	for deadline := time.Now().Add(20 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) { // polling a reconnecting client
		if got, _, err = cli.Get("/kit-k"); err == nil {
			break
		}
	}
	if err != nil || string(got) != "v" {
		t.Fatalf("after the restart: %q, %v; want the node written before it", got, err)
	}
}
