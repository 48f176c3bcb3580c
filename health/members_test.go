package health

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// TestHealthzStoreMembers: with members reported, /healthz lists them and
// is 200 while one member in use answers with a leader, whatever the
// others do and whatever Healthy says; 503 naming what each lacks
// otherwise. Without members (Redis), Healthy decides as before.
func TestHealthzStoreMembers(t *testing.T) {
	member := func(ep, id, name string, mod func(*backend.Member)) backend.Member {
		m := backend.Member{Endpoint: ep, ID: id, Name: name, Answers: true, Leader: "a1", LeaderName: "m1", InUse: true}
		if mod != nil {
			mod(&m)
		}
		return m
	}
	noLeader := func(m *backend.Member) { m.Leader, m.LeaderName = "", "" }
	down := func(m *backend.Member) {
		m.Answers, m.Error, m.Leader, m.LeaderName, m.InUse = false, "unavailable: connection refused", "", "", false
	}
	unused := func(m *backend.Member) { m.InUse = false }
	server := func(ep string, answers bool) backend.Member {
		m := backend.Member{Endpoint: ep, Answers: answers, InUse: true, Quorum: 2}
		if !answers {
			m.Error = "conn: connection refused"
		}
		return m
	}
	m1 := member("h1:2379", "a1", "m1", func(m *backend.Member) { m.Streams = 1 })
	m2 := member("h2:2379", "b2", "m2", nil)
	report := func(ms ...backend.Member) func(context.Context) ([]backend.Member, error) {
		return func(context.Context) ([]backend.Member, error) { return ms, nil }
	}
	blocked := func(ctx context.Context) ([]backend.Member, error) { <-ctx.Done(); return nil, ctx.Err() }
	pingFails := func(context.Context) error { return errors.New("ping timed out") }
	renewFails := func() []StoreFailure {
		return []StoreFailure{{Op: "renew", Class: "timeout", Error: "context deadline exceeded", Failures: 1, Since: t0, Last: t0}}
	}
	tests := []struct {
		name     string
		members  func(context.Context) ([]backend.Member, error)
		healthy  func(context.Context) error
		failures func() []StoreFailure
		code     int
		err      string // the body's "error"
		listed   int    // entries in store_members
	}{
		{name: "every member has the leader", members: report(m1, m2, member("h3:2379", "c3", "m3", nil)), code: 200, listed: 3},
		{name: "a member partitioned", members: report(m1, m2, member("h3:2379", "c3", "m3", noLeader)), code: 200, listed: 3},
		{name: "a member down", members: report(m1, m2, member("h3:2379", "c3", "m3", down)), code: 200, listed: 3},
		{name: "a member never seen", members: report(m1, backend.Member{Endpoint: "h9:2379", Error: "timeout: context deadline exceeded"}), code: 200, listed: 2},
		{name: "the member in use has no leader", members: report(member("h3:2379", "c3", "m3", noLeader)), code: 503, listed: 1,
			err: "no store member in use answers with a leader: h3:2379 (m3) has no leader"},
		{name: "the members with a leader are not in use", members: report(member("h1:2379", "a1", "m1", unused), member("h3:2379", "c3", "m3", noLeader)), code: 503, listed: 2,
			err: "no store member in use answers with a leader: h1:2379 (m1) is not in use; h3:2379 (m3) has no leader"},
		{name: "no member answers", members: report(member("h1:2379", "a1", "m1", down), backend.Member{Endpoint: "h9:2379", Error: "timeout"}), code: 503, listed: 2,
			err: "no store member in use answers with a leader: h1:2379 (m1) does not answer; h9:2379 does not answer"},
		{name: "members decide, not Healthy", members: report(m1), healthy: pingFails, code: 200, listed: 1},
		{name: "no members reported: Healthy decides", members: report(), healthy: pingFails, code: 503, err: "ping timed out"},
		{name: "no members reported, Healthy passes", members: report(), code: 200},
		{name: "the report times out", members: blocked, code: 503, err: "store members: context deadline exceeded"},
		{name: "a quorum's servers all answer", members: report(server("r1:6379", true), server("r2:6379", true), server("r3:6379", true)), code: 200, listed: 3},
		{name: "a quorum's minority down", members: report(server("r1:6379", true), server("r2:6379", false), server("r3:6379", true)), code: 200, listed: 3},
		{name: "a quorum's majority down", members: report(server("r1:6379", false), server("r2:6379", false), server("r3:6379", true)), code: 503, listed: 3,
			err: "1 of 3 servers answer, a quorum is 2: r1:6379 does not answer: conn: connection refused; r2:6379 does not answer: conn: connection refused"},
		{name: "store errors with members", members: report(m1, m2), failures: renewFails, code: 503, listed: 2,
			err: "store renew failing since 2026-03-01T11:00:00Z (timeout; 1 failed requests): context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s, _ := newTestServer(t, func(c *Config) {
				c.StoreMembers, c.Healthy, c.StoreFailures, c.Containment = tt.members, tt.healthy, tt.failures, "pidns"
			})
			s.healthTimeout = 50 * time.Millisecond
			w := do(t, s, "GET", "/healthz", "192.0.2.1:5555", nil)
			if w.Code != tt.code {
				t.Errorf("code = %d, want %d (body %s)", w.Code, tt.code, w.Body.String())
			}
			m := decode(t, w)
			wantStatus := map[int]string{200: "ok", 503: "error"}[tt.code]
			if m["status"] != wantStatus || m["containment"] != "pidns" {
				t.Errorf("status %v, containment %v; want %s, pidns", m["status"], m["containment"], wantStatus)
			}
			if got, _ := m["error"].(string); got != tt.err {
				t.Errorf("error = %q, want %q", got, tt.err)
			}
			listed, present := m["store_members"].([]any)
			if len(listed) != tt.listed || present != (tt.listed > 0) {
				t.Errorf("store_members = %v, want %d entries", m["store_members"], tt.listed)
			}
			if _, ok := m["store_errors"]; ok != (tt.failures != nil) {
				t.Errorf("store_errors present = %v, want %v", ok, tt.failures != nil)
			}
		})
	}
}

// TestHealthzMemberJSON: each member's fields, a leader as {"id","name"}
// or null.
func TestHealthzMemberJSON(t *testing.T) {
	s, _ := newTestServer(t, func(c *Config) {
		c.StoreMembers = func(context.Context) ([]backend.Member, error) {
			return []backend.Member{
				{Endpoint: "h1:2379", ID: "a1", Name: "m1", Answers: true, Leader: "a1", LeaderName: "m1", InUse: true, Streams: 2},
				{Endpoint: "h3:2379", ID: "c3", Name: "m3", Answers: true, InUse: true},
				{Endpoint: "h9:2379", Error: "unavailable: connection refused"},
			}, nil
		}
	})
	w := do(t, s, "GET", "/healthz", "192.0.2.1:5555", nil)
	want := map[string]any{"status": "ok", "store_members": []any{
		map[string]any{"endpoint": "h1:2379", "id": "a1", "name": "m1", "answers": true, "leader": map[string]any{"id": "a1", "name": "m1"}, "in_use": true, "streams": 2.0},
		map[string]any{"endpoint": "h3:2379", "id": "c3", "name": "m3", "answers": true, "leader": nil, "in_use": true, "streams": 0.0},
		map[string]any{"endpoint": "h9:2379", "answers": false, "error": "unavailable: connection refused", "leader": nil, "in_use": false, "streams": 0.0},
	}}
	if m := decode(t, w); w.Code != 200 || !reflect.DeepEqual(m, want) {
		t.Errorf("%d %v\nwant 200 %v", w.Code, m, want)
	}
}

// healthzBody is /healthz's body, as far as these tests read it.
type healthzBody struct {
	Status       string            `json:"status"`
	Error        string            `json:"error"`
	StoreMembers []storeMemberJSON `json:"store_members"`
}

// raw is the body as sent, for messages.
func (b healthzBody) raw() string { j, _ := json.Marshal(b); return string(j) }

func healthz(t *testing.T, s *Server) (int, healthzBody) {
	t.Helper()
	w := do(t, s, "GET", "/healthz", "192.0.2.1:5555", nil)
	var b healthzBody
	if err := json.Unmarshal(w.Body.Bytes(), &b); err != nil {
		t.Fatalf("/healthz body %q: %v", w.Body.String(), err)
	}
	return w.Code, b
}

// waitHealthz asks /healthz until check accepts the answer, and fails the
// test with check's last complaint after within.
func waitHealthz(t *testing.T, s *Server, within time.Duration, what string, check func(code int, b healthzBody) error) healthzBody {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		code, b := healthz(t, s)
		err := check(code, b)
		if err == nil {
			return b
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v\nlast answer: %d %s", what, within, err, code, b.raw())
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// storeServer opens the store at url and serves /healthz as electd run
// wires it (Healthy: Ping, StoreMembers: Members).
func storeServer(t *testing.T, url string) *Server {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := store.Open(ctx, store.Options{URL: url}, nil)
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = st.Close() })
	s, _ := newTestServer(t, func(c *Config) { c.Healthy, c.StoreMembers = st.Ping, st.Members })
	return s
}

// allLed accepts a 200 that lists want's endpoints, each named, answering
// and in use, all following one leader.
func allLed(want []string) func(int, healthzBody) error {
	return func(code int, b healthzBody) error {
		if code != 200 || len(b.StoreMembers) != len(want) {
			return fmt.Errorf("%d with %d members, want 200 with %d", code, len(b.StoreMembers), len(want))
		}
		for i, m := range b.StoreMembers {
			if m.Endpoint != want[i] || m.Name == "" || !m.Answers || !m.InUse || m.Leader == nil || m.Leader.Name == "" ||
				m.Leader.ID != b.StoreMembers[0].Leader.ID {
				j, _ := json.Marshal(m)
				return fmt.Errorf("member %d: %s", i, j)
			}
		}
		return nil
	}
}

// TestHealthzEtcdPartition, on a real three-member cluster: /healthz names
// every member; with a follower cut off from its peers it marks that one
// leaderless and stays 200 for a copy that reaches the others, and is 503
// for a copy that reaches only that member; both are 200 again once it
// heals.
func TestHealthzEtcdPartition(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	f := (c.Leader(t) + 1) % 3
	cut := c.Members()[f].Endpoint()
	tests := []struct {
		name  string
		hosts []string
		code  int // while f is cut off
	}{
		{name: "all members", hosts: c.Endpoints(), code: 200},
		{name: "only the partitioned member", hosts: []string{cut}, code: 503},
	}
	servers := make([]*Server, len(tests))
	for i, tt := range tests {
		servers[i] = storeServer(t, "etcd://"+strings.Join(tt.hosts, ","))
		waitHealthz(t, servers[i], 10*time.Second, tt.name+": healthy before the partition", allLed(tt.hosts))
	}

	c.Partition(f)
	t.Cleanup(func() { c.Heal(f) })
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			s := servers[i]
			b := waitHealthz(t, s, 10*time.Second, "the partitioned member leaderless", func(code int, b healthzBody) error {
				for _, m := range b.StoreMembers {
					if m.Endpoint == cut && m.Answers && m.InUse && m.Leader == nil {
						return nil
					}
				}
				return fmt.Errorf("%s not reported answering, in use, without a leader", cut)
			})
			t.Logf("%s cut off: %s", cut, b.raw())
			// Several answers in a row, across more than one check of the
			// members (one a second): every one has the same code.
			deadline := time.Now().Add(2500 * time.Millisecond)
			for n := 0; time.Now().Before(deadline); n++ {
				code, b := healthz(t, s)
				if code != tt.code {
					t.Fatalf("answer %d while %s is cut off: %d %s, want %d", n, cut, code, b.raw(), tt.code)
				}
				if tt.code == 503 && !strings.Contains(b.Error, cut) || strings.Contains(b.Error, "has no leader") != (tt.code == 503) {
					t.Fatalf("answer %d: error %q", n, b.Error)
				}
				time.Sleep(100 * time.Millisecond) // spacing probes as a load balancer does
			}
		})
	}

	c.Heal(f)
	for i, tt := range tests {
		waitHealthz(t, servers[i], 10*time.Second, tt.name+": healthy after the heal", allLed(tt.hosts))
	}
}

// TestHealthzEtcdSingle: a one-member etcd is listed as its own leader.
func TestHealthzEtcdSingle(t *testing.T) {
	srv := testenv.StartEtcd(t)
	s := storeServer(t, "etcd://"+srv.Endpoint())
	b := waitHealthz(t, s, 10*time.Second, "the member listed", allLed([]string{srv.Endpoint()}))
	if m := b.StoreMembers[0]; m.Leader.ID != m.ID || m.Leader.Name != m.Name {
		t.Errorf("single member %s does not follow itself", b.raw())
	}
}
