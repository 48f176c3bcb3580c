package main

import (
	"context"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/internal/testenv"
)

// TestZKCounter: the counting proxy counts a session's handshake, its
// requests by op and the notifications it is sent.
func TestZKCounter(t *testing.T) {
	srv := testenv.StartZK(t)
	cnt, err := newZKCounter(srv.Addr())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := cnt.close(); err != nil {
			t.Error(err)
		}
	})

	c, _, err := zkConnect([]string{cnt.Addr()}, 4*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Create("/counted", nil, 0, gozk.WorldACL(gozk.PermAll)); err != nil {
		t.Fatalf("create: %v", err)
	}
	_, _, w, err := c.ExistsW("/counted")
	if err != nil {
		t.Fatalf("exists: %v", err)
	}
	if _, _, err := c.Children("/"); err != nil {
		t.Fatalf("children: %v", err)
	}
	if err := c.Delete("/counted", -1); err != nil {
		t.Fatalf("delete: %v", err)
	}
	select {
	case ev := <-w:
		if ev.Type != gozk.EventNodeDeleted {
			t.Fatalf("watch event %v, want a deletion", ev)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no watch event within 10s")
	}
	c.Close()
	want := map[string]float64{zkHandshake: 1, "create": 1, "exists": 1, "getChildren2": 1, "delete": 1, "closeSession": 1, zkNotify: 1}
	ctx := context.Background()
	if err := waitUntil(ctx, 10*time.Second, func() bool { return cnt.snap()["closeSession"] == 1 }); err != nil {
		t.Fatalf("no closeSession counted: %v (%v)", err, cnt.snap())
	}
	got := cnt.snap()
	for k, v := range want {
		if got[k] != v {
			t.Errorf("%s: counted %v, want %v (all: %v)", k, got[k], v, got)
		}
	}

}
