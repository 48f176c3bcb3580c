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
	clientv3 "go.etcd.io/etcd/client/v3"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
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
		{"redlock,redis", []string{"redlock", "redis"}},
		{"redlock5", []string{"redlock5"}},
		{"k8s+client-go,k8s", []string{"k8s+client-go", "k8s"}},
		{"", nil},
	} {
		bs, err := Select(tt.list)
		if err != nil || !slices.Equal(names(bs), tt.want) {
			t.Errorf("Select(%q) = %q, %v; want %q", tt.list, names(bs), err, tt.want)
		}
	}
	for _, bad := range []string{"etcd,zookeeper", "redlock0", "redlockx"} {
		if _, err := Select(bad); err == nil {
			t.Errorf("Select(%q) accepted an unknown backend", bad)
		}
	}
}

// TestTopologyStores: the topologies give their --store URL, are not
// Proxyable (a kernel filter on the client ports of their nodes cuts a
// client off, but for a Redlock quorum: a proxy per server), hold no
// candidates and no run record at first, and their client reads and
// writes across a Kill and Start of every data node or member: Redis
// comes back empty, the etcd cluster and the ZooKeeper ensemble with their
// data.
func TestTopologyStores(t *testing.T) {
	for _, b := range Topologies {
		t.Run(b.Name, func(t *testing.T) {
			s := b.Start(t)
			if srv, ok := s.Servers.(*kubeShared); ok {
				kubeSharedStore(t, s, srv)
				return
			}
			scheme := b.Name
			switch s.Servers.(type) {
			case *etcdServers:
				scheme = "etcd"
			case *zkServers:
				scheme = "zk"
			}
			if url := s.Direct().URL; s.Proxyable() || !strings.HasPrefix(url, scheme+"://127.0.0.1:") {
				t.Fatalf("Proxyable() = %v, Direct().URL = %q; want false and a %s URL", s.Proxyable(), url, scheme)
			}
			if r := s.Reach(); (len(r.Addrs) == 0) == (len(r.Ports) == 0 || r.Why == "") || s.Kills == "" {
				t.Fatalf("Reach() = %+v, Kills %q; want proxies, or ports and why; and what Kill kills", r, s.Kills)
			}
			if q, rec := s.Queued(t, "none"), s.LastRun(t, "none"); q != 0 || rec != nil {
				t.Fatalf("Queued = %d, LastRun = %+v on a new store; want 0 and nil", q, rec)
			}
			switch srv := s.Servers.(type) {
			case *etcdServers:
				etcdAcrossRestart(t, s, srv.client())
			case *redisServers:
				redisAcrossRestart(t, s, srv.client())
			case *zkServers:
				zkAcrossRestart(t, s, srv)
			case *redlockServers:
				if srv.rl.Len() != RedlockServers || s.SlotsRefused == "" {
					t.Fatalf("%d servers, SlotsRefused %q; want %d and a reason", srv.rl.Len(), s.SlotsRefused, RedlockServers)
				}
				redlockAcrossRestart(t, s, srv)
			default:
				t.Fatalf("Servers %T", srv)
			}
		})
	}
}

// kubeSharedStore checks the k8s+client-go entry: one API server, reached
// through a proxy as k8s is, whose Prepare leaves a Lease client-go
// created, led and released, and whose check has client-go lead it again.
func kubeSharedStore(t *testing.T, s *Store, srv *kubeShared) {
	if url := s.Direct().URL; !s.Proxyable() || url != "k8s://"+kubeNamespace || s.SlotsRefused == "" {
		t.Fatalf("Proxyable() = %v, Direct().URL = %q, SlotsRefused %q; want true, k8s://%s and a reason", s.Proxyable(), url, s.SlotsRefused, kubeNamespace)
	}
	const election = "shared"
	after := srv.Prepare(t, election)
	ctx, cancel := context.WithTimeout(context.Background(), readTimeout)
	defer cancel()
	l, err := srv.client().CoordinationV1().Leases(kubeNamespace).Get(ctx, kube.LeaseName(election), metav1.GetOptions{})
	if err != nil {
		t.Fatalf("the prepared Lease: %v", err)
	}
	if h := l.Spec.HolderIdentity; h != nil && *h != "" {
		t.Fatalf("the prepared Lease names %q; want nobody (client-go led and released it)", *h)
	}
	if a := l.Spec.AcquireTime; a == nil || a.IsZero() {
		t.Fatalf("the prepared Lease has no acquireTime; want client-go's")
	}
	if q := s.Queued(t, election); q != 0 {
		t.Fatalf("Queued = %d on a released Lease; want 0", q)
	}
	after()
	l, err = srv.client().CoordinationV1().Leases(kubeNamespace).Get(ctx, kube.LeaseName(election), metav1.GetOptions{})
	if err != nil || l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != "client-go-after" {
		t.Fatalf("after the check the Lease names %v (%v); want client-go-after", l.Spec.HolderIdentity, err)
	}
}

func redisAcrossRestart(t *testing.T, s *Store, cli redis.UniversalClient) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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

func etcdAcrossRestart(t *testing.T, s *Store, cli *clientv3.Client) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
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

// redlockAcrossRestart: the quorum's servers are independent (each keeps
// the value written to it), and Kill and Start of the store bring every
// server back empty.
func redlockAcrossRestart(t *testing.T, s *Store, srv *redlockServers) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	clis := srv.clients()
	if len(clis) != srv.rl.Len() {
		t.Fatalf("%d clients for %d servers", len(clis), srv.rl.Len())
	}
	for i, c := range clis {
		if err := c.Set(ctx, "k", i, 0).Err(); err != nil {
			t.Fatalf("set: %v", err)
		}
	}
	for i, c := range clis {
		if got, err := c.Get(ctx, "k").Int(); err != nil || got != i {
			t.Fatalf("get on server %d = %d, %v; want %d", i, got, err, i)
		}
	}
	s.Kill(t)
	if got := srv.rl.Running(); len(got) != 0 {
		t.Fatalf("servers %v still run after Kill", got)
	}
	s.Start(t)
	for i, c := range clis {
		if err := getNil(ctx, c); err != nil {
			t.Fatalf("server %d after Kill and Start: %v", i, err)
		}
	}
}

// getNil waits (10 s at most) until k is missing on cli: a client's first
// commands after its server's restart may fail until it reconnects.
func getNil(ctx context.Context, cli redis.UniversalClient) error {
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	deadline := time.After(10 * time.Second)
	for {
		err := cli.Get(ctx, "k").Err()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		select {
		case <-tick.C:
		case <-deadline:
			return fmt.Errorf("get: %v; want redis.Nil (empty)", err)
		}
	}
}

// TestRedlockLink: a Redlock link is a fault proxy per server, named by its
// URL in the servers' order; Cut black-holes all of them, Heal lets them
// through, and one proxy cut alone cuts that server only.
func TestRedlockLink(t *testing.T) {
	s := Redlock(RedlockServers).Start(t)
	rl, ok := As[*testenv.Redlock](s)
	if _, etcd := As[*testenv.Etcd](s); !ok || etcd {
		t.Fatalf("As: a Redlock quorum %v, an etcd server %v; want true, false", ok, etcd)
	}
	l := s.Link(t)
	if len(l.Proxies) != RedlockServers || l.SysProcAttr != nil {
		t.Fatalf("%d proxies, SysProcAttr %v; want %d and none", len(l.Proxies), l.SysProcAttr, RedlockServers)
	}
	var addrs []string
	for i, px := range l.Proxies {
		if px.Target() != rl.Addrs()[i] {
			t.Fatalf("proxy %d forwards to %s, want %s", i, px.Target(), rl.Addrs()[i])
		}
		addrs = append(addrs, px.Addr())
	}
	if want := "redlock://" + strings.Join(addrs, ","); l.URL != want {
		t.Fatalf("URL %q, want %q", l.URL, want)
	}
	var clis []*redis.Client
	for _, a := range addrs {
		c := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, ReadTimeout: 200 * time.Millisecond,
			WriteTimeout: 200 * time.Millisecond, ContextTimeoutEnabled: true})
		t.Cleanup(func() { _ = c.Close() })
		clis = append(clis, c)
	}
	answers := func() []bool {
		out := make([]bool, len(clis))
		for i, c := range clis {
			ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
			out[i] = c.Ping(ctx).Err() == nil
			cancel()
		}
		return out
	}
	want := func(what string, w ...bool) {
		t.Helper()
		var got []bool
		// A connection a cut made time out is closed by the client; the
		// next PING dials again. Poll a few times for the state to show.
		for try := 0; try < 50; try++ {
			if got = answers(); slices.Equal(got, w) {
				return
			}
		}
		t.Fatalf("%s: servers answering %v, want %v", what, got, w)
	}
	want("at first", true, true, true)
	l.Cut()
	want("cut", false, false, false)
	l.Heal()
	want("healed", true, true, true)
	l.Proxies[1].Cut()
	want("proxy 1 cut", true, false, true)
	l.Proxies[1].Heal()
	want("proxy 1 healed", true, true, true)
}
