package zk

import (
	"context"
	"errors"
	"log/slog"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/internal/testenv"
)

// TestPut: put creates a missing node with the nodes above it, sets one
// that exists, and leaves the nodes above as they were; createPath is
// idempotent; existsOf reads.
func TestPut(t *testing.T) {
	srv := testenv.StartZK(t)
	z, _, err := zk.Connect([]string{srv.Addr()}, 4*time.Second, zk.WithLogInfo(false))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(z.Close)
	acl := zk.WorldACL(zk.PermAll)
	tests := []struct {
		name string
		path string
		data string
	}{
		{name: "a node and its parents made", path: "/put/a/b/c", data: "one"},
		{name: "the same node set", path: "/put/a/b/c", data: "two"},
		{name: "a sibling under parents that exist", path: "/put/a/b/d", data: "three"},
		{name: "empty data", path: "/put/e", data: ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if err := put(z, tc.path, []byte(tc.data), acl); err != nil {
				t.Fatalf("put %s: %v", tc.path, err)
			}
			got, _, err := z.Get(tc.path)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.data {
				t.Errorf("%s holds %q, want %q", tc.path, got, tc.data)
			}
		})
	}
	if err := createPath(z, "/put/a/b", acl); err != nil {
		t.Errorf("createPath on nodes that exist: %v", err)
	}
	if got, _, err := z.Get("/put/a/b/c"); err != nil || string(got) != "two" {
		t.Errorf("after createPath above it, /put/a/b/c holds %q (%v), want \"two\"", got, err)
	}
	for p, want := range map[string]bool{"/put/a/b": true, "/put/x": false} {
		if ok, err := existsOf(p)(z); err != nil || ok != want {
			t.Errorf("existsOf(%s) = %v, %v; want %v", p, ok, err, want)
		}
	}
	// A parent the ACL forbids to write under: the error names the node.
	if err := put(z, "/locked", nil, zk.WorldACL(zk.PermRead)); err != nil {
		t.Fatal(err)
	}
	if err := put(z, "/locked/x/y", nil, acl); !errors.Is(err, zk.ErrNoAuth) {
		t.Errorf("put under a read-only node: %v, want %v", err, zk.ErrNoAuth)
	}
}

// TestSessionCloseDuringRequests: a request launched after close began
// is answered errSessionClosed unsent, and close waits for those launched
// before it. Before, a request launched once close had waited (leave,
// after the Close of an elector: CI run J, TestTermNoOrphans) added to
// the wait group close had waited on, which -race reports.
func TestSessionCloseDuringRequests(t *testing.T) {
	srv := testenv.StartZK(t)
	c := &Conn{hosts: []string{srv.Addr()}, logger: slog.New(slog.DiscardHandler)}
	s, err := c.open(4 * time.Second)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.ready(context.Background()); err != nil {
		t.Fatal(err)
	}
	release := make(chan struct{})
	held := start(s, func(*zk.Conn) (struct{}, error) { <-release; return struct{}{}, nil })
	late := make(chan error, 1)
	go func() {
		// Ordered after close by time alone, not by a synchronisation
		// (which would hide the race): close returns after about 100ms.
		time.Sleep(time.Second)
		_, err := do(context.Background(), s, existsOf("/"))
		late <- err
	}()
	go func() {
		time.Sleep(100 * time.Millisecond)
		close(release)
	}()
	s.close() // waits for held
	if _, err := held.wait(context.Background()); err != nil {
		t.Errorf("the request in flight at close: %v", err)
	}
	if err := <-late; !errors.Is(err, errSessionClosed) {
		t.Errorf("a request after close: %v, want %v", err, errSessionClosed)
	}
}
