package testenv

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisSentinel(t *testing.T) {
	begin := time.Now()
	s := StartRedisSentinel(t)
	t.Logf("topology of 3 data nodes and 3 sentinels healthy after %v", time.Since(begin).Round(time.Millisecond))
	if want := "redis+sentinel://" + strings.Join(s.SentinelAddrs(), ",") + "/" + s.MasterName(); s.URL() != want || len(s.SentinelAddrs()) != 3 {
		t.Fatalf("URL() = %q, want %q with 3 sentinels", s.URL(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := s.Client(t)
	if err := cli.Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set: %v", err)
	}
	old := s.Master(t)
	if old != s.Nodes()[0].Addr() {
		t.Fatalf("master = %s, want the first data node %s", old, s.Nodes()[0].Addr())
	}
	// The replicas have k once WAIT says both got it.
	if n, err := cli.Do(ctx, "WAIT", 2, 5000).Int(); err != nil || n != 2 {
		t.Fatalf("wait for 2 replicas = %d, %v", n, err)
	}

	begin = time.Now()
	killed := s.KillMaster(t)
	addr := s.WaitFailover(t, old, 30*time.Second)
	t.Logf("failover: new master %s answers writes %v after the master was killed", addr, time.Since(begin).Round(time.Millisecond))
	if killed.Addr() != old || killed.Pid() != 0 || addr == old {
		t.Fatalf("killed %s (pid %d), new master %s; want %s killed and another master", killed, killed.Pid(), addr, old)
	}
	if got, err := cli.Get(ctx, "k").Result(); err != nil || got != "v" {
		t.Fatalf("get through the failover client after the failover = %q, %v; want the replicated \"v\"", got, err)
	}
	if err := cli.Set(ctx, "k2", "v2", 0).Err(); err != nil {
		t.Fatalf("set after the failover: %v", err)
	}

	// The old master comes back as a replica of the new one.
	killed.Start(t)
	s.WaitHealthy(t)
	if m := s.Master(t); m != addr {
		t.Fatalf("master after the old one came back = %s, want %s", m, addr)
	}
	role, err := killed.admin.Do(ctx, "ROLE").Slice()
	if err != nil || len(role) == 0 || role[0] != "slave" {
		t.Fatalf("role of the restarted old master = %v, %v; want slave", role, err)
	}

	// All data nodes down and up again: empty, same master, healthy.
	begin = time.Now()
	s.Kill(t)
	for _, n := range s.Nodes() {
		if n.Pid() != 0 {
			t.Fatalf("data node %s still running after Kill", n)
		}
	}
	s.Start(t)
	t.Logf("full restart of the data nodes: healthy after %v", time.Since(begin).Round(time.Millisecond))
	if m := s.Master(t); m != addr {
		t.Fatalf("master after a full restart = %s, want %s (the sentinels' master before it)", m, addr)
	}
	if got, err := cli.Get(ctx, "k2").Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("get after a full restart = %q, %v; want redis.Nil (empty)", got, err)
	}
	if err := cli.Set(ctx, "k3", "v3", 0).Err(); err != nil {
		t.Fatalf("set after a full restart: %v", err)
	}
	for _, n := range s.Nodes() {
		if n.Addr() == addr {
			continue
		}
		if err := pollUntil(10*time.Second, func(ctx context.Context) error {
			got, err := n.admin.Get(ctx, "k3").Result()
			if err != nil || got != "v3" {
				return fmt.Errorf("get k3 on replica %s = %q, %w", n, got, err)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}
