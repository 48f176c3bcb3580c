package testenv

import (
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"
)

// Redlock is N independent redis-servers (no replication between them, no
// cluster), the store of electd's redlock:// backend: a quorum over them.
// Each is a Redis of its own (StartRedis), without persistence: Start
// brings a server back on its port with EMPTY data.
type Redlock struct {
	servers []*Redis
}

// StartRedlock starts n redis-servers (at least one) on free loopback
// ports, each as StartRedis does, and waits until every one answers PING.
// They are killed in t.Cleanup. A missing binary skips the test (fails it
// when $CI is set).
func StartRedlock(t testing.TB, n int) *Redlock {
	t.Helper()
	if n < 1 {
		t.Fatalf("testenv: StartRedlock(%d): need at least one server", n)
	}
	r := &Redlock{}
	for range n {
		r.servers = append(r.servers, StartRedis(t))
	}
	return r
}

// RedlockURL is electd's --store for a quorum over addrs (host:port each,
// in order): "redlock://a,b,c".
func RedlockURL(addrs []string) string { return "redlock://" + strings.Join(addrs, ",") }

// Len is the number of servers.
func (r *Redlock) Len() int { return len(r.servers) }

// Majority is the number of servers a term needs: Len()/2 + 1.
func (r *Redlock) Majority() int { return len(r.servers)/2 + 1 }

// Servers returns the servers, in the order of Addrs and URL.
func (r *Redlock) Servers() []*Redis { return append([]*Redis(nil), r.servers...) }

// Server returns server i.
func (r *Redlock) Server(i int) *Redis { return r.servers[i] }

// Addrs returns every server's address, "127.0.0.1:PORT", in order.
func (r *Redlock) Addrs() []string {
	var out []string
	for _, s := range r.servers {
		out = append(out, s.Addr())
	}
	return out
}

// URL is electd's --store for the quorum: "redlock://a,b,c".
func (r *Redlock) URL() string { return RedlockURL(r.Addrs()) }

// Clients returns a go-redis client of each server, in order, closed in
// t.Cleanup.
func (r *Redlock) Clients(t testing.TB) []*redis.Client {
	t.Helper()
	var out []*redis.Client
	for _, s := range r.servers {
		out = append(out, s.Client(t))
	}
	return out
}

// Running returns the indices of the servers whose process is up.
func (r *Redlock) Running() []int {
	var out []int
	for i, s := range r.servers {
		if s.Pid() != 0 {
			out = append(out, i)
		}
	}
	return out
}

// Kill SIGKILLs server i and waits until it is gone; a no-op if it is not
// running. Any goroutine.
func (r *Redlock) Kill(t testing.TB, i int) { t.Helper(); r.servers[i].Kill(t) }

// Start starts server i again on its port, EMPTY, and waits until it
// answers PING. The test goroutine only.
func (r *Redlock) Start(t testing.TB, i int) { t.Helper(); r.servers[i].Start(t) }

// Restart is Kill then Start of server i: it comes back empty at once.
func (r *Redlock) Restart(t testing.TB, i int) {
	t.Helper()
	r.Kill(t, i)
	r.Start(t, i)
}

// Stop sends SIGTERM to every running server and waits until they are
// gone. Any goroutine.
func (r *Redlock) Stop(t testing.TB) {
	t.Helper()
	for _, s := range r.servers {
		s.Stop(t)
	}
}

// KillAll SIGKILLs every running server and waits until they are gone.
func (r *Redlock) KillAll(t testing.TB) {
	t.Helper()
	killEach(t, r.servers)
}

// StartAll starts every server that is not running, EMPTY, and waits until
// each answers PING. The test goroutine only.
func (r *Redlock) StartAll(t testing.TB) {
	t.Helper()
	startStopped(t, r.servers)
}
