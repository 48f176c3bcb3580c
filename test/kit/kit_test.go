package kit

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
)

func TestSelect(t *testing.T) {
	names := func(bs []Backend) []string {
		var out []string
		for _, b := range bs {
			out = append(out, b.Name)
		}
		return out
	}
	for _, tt := range []struct {
		list string
		want []string
	}{
		{"etcd,redis", []string{"etcd", "redis"}},
		{" redis , etcd", []string{"redis", "etcd"}},
		{"redis,", []string{"redis"}},
		{"redis+sentinel, redis+cluster,etcd", []string{"redis+sentinel", "redis+cluster", "etcd"}},
		{"", nil},
	} {
		bs, err := Select(tt.list)
		if err != nil || !slices.Equal(names(bs), tt.want) {
			t.Errorf("Select(%q) = %q, %v; want %q", tt.list, names(bs), err, tt.want)
		}
	}
	if _, err := Select("etcd,zookeeper"); err == nil {
		t.Error("Select accepted an unknown backend")
	}
}

// TestTopologyStores: the Sentinel and Cluster stores give their topology's
// --store URL, are not Proxyable, and their RedisClient reads and writes
// across a Kill and Start of the data nodes (empty afterwards).
func TestTopologyStores(t *testing.T) {
	for _, b := range Topologies {
		t.Run(b.Name, func(t *testing.T) {
			s := b.Start(t)
			if s.Proxyable() || !strings.HasPrefix(s.DirectURL(), b.Name+"://127.0.0.1:") {
				t.Fatalf("Proxyable() = %v, DirectURL() = %q; want false and a %s URL", s.Proxyable(), s.DirectURL(), b.Name)
			}
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			cli := s.RedisClient(t)
			if err := cli.Set(ctx, "electd:{e}:k", "v", 0).Err(); err != nil {
				t.Fatalf("set: %v", err)
			}
			if got, err := cli.Get(ctx, "electd:{e}:k").Result(); err != nil || got != "v" {
				t.Fatalf("get = %q, %v; want \"v\"", got, err)
			}
			s.Kill(t)
			s.Start(t)
			// The clients' connections died with the nodes: the first
			// commands may fail until they reconnect.
			tick := time.NewTicker(10 * time.Millisecond)
			defer tick.Stop()
			deadline := time.After(10 * time.Second)
			err := cli.Get(ctx, "electd:{e}:k").Err()
			for wait := true; wait && !errors.Is(err, redis.Nil); err = cli.Get(ctx, "electd:{e}:k").Err() {
				select {
				case <-tick.C:
				case <-deadline:
					wait = false
				}
			}
			if !errors.Is(err, redis.Nil) {
				t.Fatalf("get after Kill and Start: %v; want redis.Nil (empty)", err)
			}
		})
	}
}
