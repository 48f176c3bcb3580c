package testenv

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestRedisCluster(t *testing.T) {
	begin := time.Now()
	c := StartRedisCluster(t)
	t.Logf("cluster of 6 nodes healthy after %v", time.Since(begin).Round(time.Millisecond))
	if want := "redis+cluster://" + strings.Join(c.Addrs(), ","); c.URL() != want || len(c.Addrs()) != 6 {
		t.Fatalf("URL() = %q, want %q with 6 nodes", c.URL(), want)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := c.Client(t)

	// Slot agrees with the server's CLUSTER KEYSLOT, hash tags included.
	for _, k := range []string{"k", "electd:{e1}:queue", "{}x", "a{b}c{d}", "{user1000}.following", ""} {
		want, err := cli.ClusterKeySlot(ctx, k).Result()
		if err != nil || int(want) != Slot(k) {
			t.Fatalf("Slot(%q) = %d; CLUSTER KEYSLOT = %d, %v", k, Slot(k), want, err)
		}
	}

	// Ten keys in one slot, written and read through the cluster client.
	keys := make([]string, 10)
	for i := range keys {
		keys[i] = fmt.Sprintf("{t}:%d", i)
		if err := cli.Set(ctx, keys[i], i, 0).Err(); err != nil {
			t.Fatalf("set %s: %v", keys[i], err)
		}
	}
	slot := Slot("{t}")
	get := func(k string) string {
		t.Helper()
		v, err := cli.Get(ctx, k).Result()
		if err != nil {
			t.Fatalf("get %s: %v", k, err)
		}
		return v
	}

	// Reshard the slot to another master; halfway, a key still on the
	// source answers there and a moved one answers -ASK there, and the
	// client reads both.
	src := c.MasterOf(t, slot)
	var to *RedisNode
	for _, n := range c.Masters(t) {
		if n != src {
			to = n
			break
		}
	}
	paused := false
	begin = time.Now()
	c.Reshard(t, slot, to, func() {
		paused = true
		var here, moved int
		for i, k := range keys {
			err := src.admin.Get(ctx, k).Err()
			switch {
			case err == nil:
				here++
			case strings.HasPrefix(err.Error(), "ASK "):
				moved++
			default:
				t.Fatalf("get %s directly on the source during the migration: %v", k, err)
			}
			if got := get(k); got != fmt.Sprint(i) {
				t.Fatalf("get %s during the migration = %q, want %d", k, got, i)
			}
		}
		if here == 0 || moved == 0 {
			t.Fatalf("during the migration: %d keys on the source, %d moved; want some of each", here, moved)
		}
		if err := cli.Set(ctx, "{t}:new", "n", 0).Err(); err != nil {
			t.Fatalf("set a new key during the migration: %v", err)
		}
	})
	t.Logf("reshard of slot %d (11 keys) from %s to %s: %v", slot, src, to, time.Since(begin).Round(time.Millisecond))
	if !paused || c.MasterOf(t, slot) != to {
		t.Fatalf("after Reshard: paused %v, slot %d on %s; want it on %s", paused, slot, c.MasterOf(t, slot), to)
	}
	for i, k := range keys {
		if got := get(k); got != fmt.Sprint(i) {
			t.Fatalf("get %s after the reshard = %q, want %d", k, got, i)
		}
	}
	if get("{t}:new") != "n" {
		t.Fatal("the key written during the migration is lost")
	}

	// Kill the slot's master: a replica takes over and has the keys (once
	// WAIT says it got them); the old master comes back as its replica.
	if n, err := to.admin.Do(ctx, "WAIT", 1, 5000).Int(); err != nil || n != 1 {
		t.Fatalf("wait for the replica of %s = %d, %v", to, n, err)
	}
	begin = time.Now()
	newMaster := c.Failover(t, slot)
	t.Logf("failover of slot %d from %s to %s after kill -9: %v", slot, to, newMaster, time.Since(begin).Round(time.Millisecond))
	// go-redis reloads its slot map on -MOVED and -ASK, and when the map is
	// 10 s old, but not on failing to dial the dead master: without this,
	// it would keep dialling it for up to 10 s.
	cli.ReloadState(ctx)
	if err := pollUntil(10*time.Second, func(ctx context.Context) error {
		v, err := cli.Get(ctx, keys[3]).Result()
		if err != nil || v != "3" {
			return fmt.Errorf("get %s after the failover = %q, %w; want \"3\"", keys[3], v, err)
		}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := cli.Set(ctx, keys[3], "after", 0).Err(); err != nil {
		t.Fatalf("set after the failover: %v", err)
	}
	to.Start(t)
	c.WaitHealthy(t)
	if reps := c.ReplicasOf(t, slot); !slices.Contains(reps, to) {
		t.Fatalf("replicas of slot %d after the old master came back = %v, want %s among them", slot, reps, to)
	}

	begin = time.Now()
	if got := c.ManualFailover(t, slot); got != to {
		t.Fatalf("manual failover of slot %d went to %s, want %s", slot, got, to)
	}
	t.Logf("manual failover of slot %d back to %s: %v", slot, to, time.Since(begin).Round(time.Millisecond))

	// A full restart keeps the slot map and loses the data.
	before := c.rangeOf(t, slot)
	begin = time.Now()
	c.Kill(t)
	c.Start(t)
	t.Logf("full restart of the 6 nodes: healthy after %v", time.Since(begin).Round(time.Millisecond))
	if after := c.rangeOf(t, slot); after.master != before.master || after.start != before.start {
		t.Fatalf("slot %d after a full restart: %v, want %v", slot, after, before)
	}
	if v, err := cli.Get(ctx, keys[0]).Result(); !errors.Is(err, redis.Nil) {
		t.Fatalf("get after a full restart = %q, %v; want redis.Nil (empty)", v, err)
	}
	if err := cli.Set(ctx, keys[0], "x", 0).Err(); err != nil {
		t.Fatalf("set after a full restart: %v", err)
	}
}
