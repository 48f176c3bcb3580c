package etcd_test

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/etcd"
	"github.com/electd/electd/internal/testenv"
)

// memberReporter is what store/ asks of a connection for /healthz.
type memberReporter interface {
	backend.Conn
	Members(ctx context.Context) ([]backend.Member, error)
}

// dialMembers dials hosts as store/ does and returns the connection,
// closed when the test ends.
func dialMembers(t *testing.T, hosts ...string) memberReporter {
	t.Helper()
	conn := electortest.Open(t, etcd.Backend, "etcd://"+strings.Join(hosts, ","))
	r, ok := conn.(memberReporter)
	if !ok {
		t.Fatalf("the etcd connection %T reports no members", conn)
	}
	return r
}

// waitMembers polls r until check accepts its report, and fails the test
// with check's last complaint after within.
func waitMembers(t *testing.T, r memberReporter, within time.Duration, what string, check func([]backend.Member) error) []backend.Member {
	t.Helper()
	deadline := time.Now().Add(within)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		ms, err := r.Members(ctx)
		cancel()
		if err == nil {
			if err = check(ms); err == nil {
				return ms
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not after %s: %v\nlast report: %+v", what, within, err, ms)
		}
		time.Sleep(20 * time.Millisecond) // polling a condition, not synchronising on time
	}
}

// names maps every member id (hex, as reported) to its name, from etcd.
func names(t *testing.T, cli *clientv3.Client) map[string]string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := cli.MemberList(ctx)
	if err != nil {
		t.Fatalf("member list: %v", err)
	}
	out := map[string]string{}
	for _, m := range resp.Members {
		out[fmt.Sprintf("%x", m.ID)] = m.Name
	}
	return out
}

// healthy is the state of a member in a cluster with a quorum: it
// answers, electd uses it, and it follows leader (id).
func healthy(m backend.Member, names map[string]string, leader string) error {
	switch {
	case !m.Answers || m.Error != "":
		return fmt.Errorf("%s does not answer: %q", m.Endpoint, m.Error)
	case m.Name == "" || names[m.ID] != m.Name:
		return fmt.Errorf("%s is id %q named %q; the members are %v", m.Endpoint, m.ID, m.Name, names)
	case m.Leader != leader || m.LeaderName != names[leader]:
		return fmt.Errorf("%s follows %q (%q), want %q (%q)", m.Endpoint, m.Leader, m.LeaderName, leader, names[leader])
	case !m.InUse:
		return fmt.Errorf("%s is not in use", m.Endpoint)
	}
	return nil
}

// TestMembersCluster: a connection to all three members names each of
// them in order, with the leader they follow, and uses all three once it
// has sent a request (none before: the checks are not electd's requests); a
// partitioned member still answers and is still used, without a leader,
// while the others keep theirs; a killed member does not answer, keeps its
// id, and is no longer used, and answers again once restarted; a watch
// shows as a stream on the member it runs on.
func TestMembersCluster(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	ids := names(t, c.Client(t))
	r := dialMembers(t, c.Endpoints()...)
	ctx := context.Background()
	// gRPC connects at the first request: before electd sends one, the
	// members answer the checks (on connections of their own), and none
	// is in use.
	waitMembers(t, r, 10*time.Second, "members answering, none in use yet", func(ms []backend.Member) error {
		for _, m := range ms {
			if !m.Answers || m.InUse || m.Streams != 0 {
				return fmt.Errorf("%+v", m)
			}
		}
		return nil
	})
	if err := r.Ping(ctx); err != nil { // connects to every member
		t.Fatalf("ping: %v", err)
	}
	leaderID := func() string {
		st, err := c.Status(ctx, c.Leader(t))
		if err != nil {
			t.Fatal(err)
		}
		return fmt.Sprintf("%x", st.Header.MemberId)
	}
	allHealthy := func(leader string) func([]backend.Member) error {
		return func(ms []backend.Member) error {
			if len(ms) != len(c.Endpoints()) {
				return fmt.Errorf("%d members reported, want %d", len(ms), len(c.Endpoints()))
			}
			for i, m := range ms {
				if m.Endpoint != c.Endpoints()[i] {
					return fmt.Errorf("member %d is %s, want %s (the URL's order)", i, m.Endpoint, c.Endpoints()[i])
				}
				if err := healthy(m, ids, leader); err != nil {
					return err
				}
			}
			return nil
		}
	}
	ms := waitMembers(t, r, 10*time.Second, "all members healthy", allHealthy(leaderID()))
	t.Logf("members: %+v", ms)

	t.Run("partitioned follower", func(t *testing.T) {
		leader := c.Leader(t)
		f := (leader + 1) % 3
		lid := leaderID()
		c.Partition(f)
		t.Cleanup(func() { c.Heal(f) })
		begin := time.Now()
		ms := waitMembers(t, r, 10*time.Second, "the partitioned member without a leader", func(ms []backend.Member) error {
			for i, m := range ms {
				if i != f {
					if err := healthy(m, ids, lid); err != nil {
						return err
					}
					continue
				}
				if !m.Answers || m.Leader != "" || m.LeaderName != "" || !m.InUse || m.Name == "" || m.Name != ids[m.ID] {
					return fmt.Errorf("partitioned %s: %+v, want it answering, in use, named, without a leader", m.Endpoint, m)
				}
			}
			return nil
		})
		t.Logf("m%d partitioned: reported leaderless after %v: %+v", f, time.Since(begin), ms[f])

		c.Heal(f)
		waitMembers(t, r, 10*time.Second, "all members healthy after the partition healed", allHealthy(lid))
	})

	t.Run("killed member", func(t *testing.T) {
		k := (c.Leader(t) + 1) % 3
		lid := leaderID()
		before := waitMembers(t, r, 10*time.Second, "all members healthy", allHealthy(lid))[k]
		m := c.Members()[k]
		m.Kill(t)
		down := waitMembers(t, r, 10*time.Second, "the killed member not answering, not in use", func(ms []backend.Member) error {
			d := ms[k]
			if d.Answers || d.Error == "" || d.InUse || d.Leader != "" || d.Streams != 0 {
				return fmt.Errorf("killed %s: %+v", d.Endpoint, d)
			}
			if d.ID != before.ID || d.Name != before.Name {
				return fmt.Errorf("killed %s is %q (%q), was %q (%q)", d.Endpoint, d.ID, d.Name, before.ID, before.Name)
			}
			for i, o := range ms {
				if i != k {
					if err := healthy(o, ids, lid); err != nil {
						return err
					}
				}
			}
			return nil
		})[k]
		t.Logf("killed: %+v", down)

		m.Start(t)
		c.WaitHealthy(t)
		if err := r.Ping(ctx); err != nil {
			t.Fatalf("ping: %v", err)
		}
		waitMembers(t, r, 20*time.Second, "all members healthy after the restart", allHealthy(leaderID()))
	})

	t.Run("watch stream", func(t *testing.T) { // the elector's view of its election is a watch
		el, err := r.NewElector(elector.Candidate{Election: "members", ID: "w", Timing: timingOf(5 * time.Second)})
		if err != nil {
			t.Fatal(err)
		}
		defer el.Close()
		octx, cancel := context.WithCancel(ctx)
		var wg sync.WaitGroup
		defer wg.Wait()
		defer cancel()
		ch := el.Observe(octx)
		wg.Go(func() {
			for range ch {
			}
		})
		streams := func(ms []backend.Member) int {
			n := 0
			for _, m := range ms {
				n += m.Streams
			}
			return n
		}
		waitMembers(t, r, 10*time.Second, "a stream open while observing", func(ms []backend.Member) error {
			if n := streams(ms); n < 1 {
				return fmt.Errorf("%d streams", n)
			}
			return nil
		})
		cancel()
		if err := el.Close(); err != nil { // the view's watch lives as long as the elector
			t.Fatalf("close: %v", err)
		}
		wg.Wait()
		waitMembers(t, r, 10*time.Second, "no stream once the watch ended", func(ms []backend.Member) error {
			if n := streams(ms); n != 0 {
				return fmt.Errorf("%d streams", n)
			}
			return nil
		})
	})
}

// TestMembersOnlyPartitioned: a connection given only a member that is cut
// off from its peers uses it and reports it answering without a leader,
// and with its leader once the partition heals.
func TestMembersOnlyPartitioned(t *testing.T) {
	c := testenv.StartEtcdCluster(t)
	f := (c.Leader(t) + 1) % 3
	r := dialMembers(t, c.Members()[f].Endpoint())
	ctx := context.Background()
	if err := r.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	c.Partition(f)
	t.Cleanup(func() { c.Heal(f) })
	waitMembers(t, r, 10*time.Second, "the one member in use without a leader", func(ms []backend.Member) error {
		if len(ms) != 1 || !ms[0].Answers || !ms[0].InUse || ms[0].Leader != "" {
			return fmt.Errorf("report %+v", ms)
		}
		return nil
	})
	c.Heal(f)
	waitMembers(t, r, 10*time.Second, "its leader back after the heal", func(ms []backend.Member) error {
		if ms[0].Leader == "" {
			return fmt.Errorf("report %+v", ms)
		}
		return nil
	})
}

// TestMembersSingle: a one-member etcd is its own leader. However many
// callers ask at once, and however often, it gets at most one Status per
// memberCheckEvery (1 s) from the connection, counted by etcd itself.
func TestMembersSingle(t *testing.T) {
	srv := testenv.StartEtcd(t)
	ids := names(t, srv.Client(t))
	r := dialMembers(t, srv.Endpoint())
	if err := r.Ping(context.Background()); err != nil {
		t.Fatalf("ping: %v", err)
	}
	before := statusCalls(t, srv.Endpoint())

	// A burst of callers on a fresh connection share one check.
	start := time.Now()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var reports [][]backend.Member
	for range 20 {
		wg.Go(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			defer cancel()
			ms, err := r.Members(ctx)
			if err != nil {
				t.Errorf("members: %v", err)
			}
			mu.Lock()
			reports = append(reports, ms)
			mu.Unlock()
		})
	}
	wg.Wait()
	if n := statusCalls(t, srv.Endpoint()) - before; n != 1 {
		t.Errorf("20 callers at once cost %d Status requests, want 1", n)
	}
	for _, ms := range reports {
		if len(ms) != 1 {
			t.Fatalf("report %+v, want one member", ms)
		}
		m := ms[0]
		if err := healthy(m, ids, m.ID); err != nil {
			t.Errorf("single member: %v (%+v)", err, m)
		}
	}

	// Callers asking without pause for a while: one check a second at most.
	stop := start.Add(2500 * time.Millisecond)
	for range 4 {
		wg.Go(func() {
			for time.Now().Before(stop) {
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				if _, err := r.Members(ctx); err != nil {
					t.Errorf("members: %v", err)
				}
				cancel()
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	n := statusCalls(t, srv.Endpoint()) - before
	most := int(elapsed/time.Second) + 1
	t.Logf("%d Status requests in %v of callers asking without pause", n, elapsed)
	if n > most {
		t.Errorf("%d Status requests in %v, want at most %d (one a second)", n, elapsed, most)
	}
}

// statusCalls reads how many Status requests etcd at endpoint has served,
// from its own metrics.
func statusCalls(t *testing.T, endpoint string) int {
	t.Helper()
	resp, err := http.Get("http://" + endpoint + "/metrics")
	if err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	defer resp.Body.Close()
	total := 0
	sc := bufio.NewScanner(resp.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "grpc_server_handled_total{") || !strings.Contains(line, `grpc_method="Status"`) {
			continue
		}
		f := strings.Fields(line)
		v, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("etcd metrics: %q: %v", line, err)
		}
		total += int(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatalf("etcd metrics: %v", err)
	}
	return total
}
