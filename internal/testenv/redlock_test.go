package testenv

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

// TestRedlock: three independent servers, each with its own data; URL
// names them in order; Kill and Start of one bring it back empty on its
// port while the others keep theirs; StartAll after KillAll brings every
// one back empty.
func TestRedlock(t *testing.T) {
	r := StartRedlock(t, 3)
	addrs := r.Addrs()
	if r.Len() != 3 || r.Majority() != 2 || len(addrs) != 3 || r.URL() != "redlock://"+strings.Join(addrs, ",") {
		t.Fatalf("Len %d, Majority %d, Addrs %q, URL %q", r.Len(), r.Majority(), addrs, r.URL())
	}
	if addrs[0] == addrs[1] || addrs[1] == addrs[2] || addrs[0] == addrs[2] {
		t.Fatalf("servers share an address: %q", addrs)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	clis := r.Clients(t)
	for i, c := range clis {
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatalf("set on %s: %v", addrs[i], err)
		}
	}
	for i, c := range clis { // independent: each keeps its own value
		if got, err := c.Get(ctx, "k").Int(); err != nil || got != i {
			t.Fatalf("get on %s = %d, %v; want %d", addrs[i], got, err, i)
		}
	}

	pid := r.Server(1).Pid()
	r.Kill(t, 1)
	if got := r.Running(); len(got) != 2 || got[0] != 0 || got[1] != 2 {
		t.Fatalf("Running() after Kill(1) = %v, want [0 2]", got)
	}
	r.Start(t, 1)
	if r.Server(1).Addr() != addrs[1] || r.Server(1).Pid() == pid || r.Server(1).Pid() == 0 {
		t.Fatalf("after Kill and Start: %s pid %d, want %s and a new pid (was %d)", r.Server(1).Addr(), r.Server(1).Pid(), addrs[1], pid)
	}
	want := []int{0, -1, 2} // -1: empty
	check := func(when string) {
		t.Helper()
		for i, c := range clis {
			got, err := c.Get(ctx, "k").Int()
			switch {
			case want[i] < 0 && !errors.Is(err, redis.Nil):
				t.Fatalf("%s: get on %s = %d, %v; want redis.Nil (empty)", when, addrs[i], got, err)
			case want[i] >= 0 && (err != nil || got != want[i]):
				t.Fatalf("%s: get on %s = %d, %v; want %d", when, addrs[i], got, err, want[i])
			}
		}
	}
	check("after Kill(1) and Start(1)")

	r.Restart(t, 2)
	want[2] = -1
	check("after Restart(2)")

	r.KillAll(t)
	if got := r.Running(); len(got) != 0 {
		t.Fatalf("Running() after KillAll = %v", got)
	}
	r.StartAll(t)
	want[0] = -1
	check("after KillAll and StartAll")
	r.Stop(t)
	if got := r.Running(); len(got) != 0 {
		t.Fatalf("Running() after Stop = %v", got)
	}
}
