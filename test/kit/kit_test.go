package kit

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
		{"etcd-cluster,etcd", []string{"etcd-cluster", "etcd"}},
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

// TestTopologyStores: the topologies give their --store URL, are not
// Proxyable, and their client (RedisClient, EtcdClient) reads and writes
// across a Kill and Start of every data node or member: Redis comes back
// empty, the etcd cluster with its data.
func TestTopologyStores(t *testing.T) {
	for _, b := range Topologies {
		t.Run(b.Name, func(t *testing.T) {
			s := b.Start(t)
			scheme := b.Name
			if s.IsEtcd() {
				scheme = "etcd"
			}
			if s.Proxyable() || !strings.HasPrefix(s.DirectURL(), scheme+"://127.0.0.1:") {
				t.Fatalf("Proxyable() = %v, DirectURL() = %q; want false and a %s URL", s.Proxyable(), s.DirectURL(), scheme)
			}
			if s.IsEtcd() {
				etcdAcrossRestart(t, s)
			} else {
				redisAcrossRestart(t, s)
			}
		})
	}
}

func redisAcrossRestart(t *testing.T, s *Store) {
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
}

func etcdAcrossRestart(t *testing.T, s *Store) {
	if s.RedisClient(t) != nil {
		t.Fatal("RedisClient of an etcd store is not nil")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cli := s.EtcdClient(t)
	if _, err := cli.Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put: %v", err)
	}
	s.Kill(t)
	s.Start(t) // every member follows one leader again
	get := func() (string, error) {
		rctx, rcancel := context.WithTimeout(ctx, time.Second)
		defer rcancel()
		resp, err := cli.Get(rctx, "k")
		if err != nil {
			return "", err
		}
		if len(resp.Kvs) != 1 {
			return "", fmt.Errorf("%d keys", len(resp.Kvs))
		}
		return string(resp.Kvs[0].Value), nil
	}
	// The client's connections died with the members: it may take a
	// moment to reconnect.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	got, err := get()
	for wait := true; wait && err != nil; got, err = get() {
		select {
		case <-tick.C:
		case <-deadline:
			wait = false
		}
	}
	if err != nil || got != "v" {
		t.Fatalf("get after Kill and Start = %q, %v; want \"v\" (etcd keeps its data)", got, err)
	}
}
