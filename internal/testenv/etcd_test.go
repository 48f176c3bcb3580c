package testenv

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"
)

func TestEtcd(t *testing.T) {
	e := StartEtcd(t)
	if !strings.HasPrefix(e.Endpoint(), "127.0.0.1:") {
		t.Fatalf("Endpoint() = %q, want 127.0.0.1:PORT", e.Endpoint())
	}
	if st, err := os.Stat(e.DataDir()); err != nil || !st.IsDir() {
		t.Fatalf("data dir %s: %v", e.DataDir(), err)
	}
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	if _, err := cli.Put(ctx, "k", "v1"); err != nil {
		t.Fatalf("put: %v", err)
	}
	expectEtcd(ctx, t, e, "k", "v1")

	endpoint, pid := e.Endpoint(), e.Pid()
	e.Restart(t)
	if e.Endpoint() != endpoint || e.Pid() == pid || e.Pid() == 0 {
		t.Fatalf("after restart: endpoint %s pid %d, want %s and a new pid (was %d)", e.Endpoint(), e.Pid(), endpoint, pid)
	}
	expectEtcd(ctx, t, e, "k", "v1") // same data dir: data kept

	if _, err := cli.Put(ctx, "k", "v2"); err != nil {
		t.Fatalf("put after restart: %v", err)
	}
	e.Kill(t)
	if e.Pid() != 0 {
		t.Fatalf("Pid() = %d after Kill, want 0", e.Pid())
	}
	e.Kill(t) // no-op when not running
	e.Stop(t)
	e.Start(t)
	expectEtcd(ctx, t, e, "k", "v2") // acknowledged writes survive SIGKILL
}

// expectEtcd reads key through a new client and through the shared one.
func expectEtcd(ctx context.Context, t *testing.T, e *Etcd, key, want string) {
	t.Helper()
	resp, err := e.Client(t).Get(ctx, key)
	if err != nil {
		t.Fatalf("get %s: %v", key, err)
	}
	if len(resp.Kvs) != 1 || string(resp.Kvs[0].Value) != want {
		t.Fatalf("get %s = %v, want %q", key, resp.Kvs, want)
	}
}
