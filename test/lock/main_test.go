package lock

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/test/kit"
)

// bin holds electd and the recorder, built by TestMain.
var bin kit.Binaries

func TestMain(m *testing.M) { kit.Main(m, "lock", "E2E", &bin) }

// scenarios run, one after another, against each backend's one server;
// each has its own lock name and record log.
var scenarios = []struct {
	name string
	run  func(t *testing.T, s *store)
}{
	{"MutualExclusion", testMutualExclusion},
	{"Handover", testHandover},
	{"Busy", testBusy},
	{"SignalsLeaveNothing", testSignals},
	{"ExitCodes", testExitCodes},
	{"LostLockStopsCommand", testLostLock},
	{"Slots", testSlots},
	{"SlotsMismatch", testSlotsMismatch},
	{"OncePer", testOncePer},
	{"OncePerFailedRunRetries", testOncePerRetry},
	{"LeaderWatch", testLeaderWatch},
	{"TreeMainKilled", testTreeMainKilled},
	{"ContainmentRefused", testContainmentRefused},
}

// TestBackends runs every scenario against a real etcd and a real Redis;
// the two backends run in parallel, each on its own server.
func TestBackends(t *testing.T) {
	kit.Run(t, kit.Selected(t, "LOCK_BACKENDS"), func(t *testing.T, ks *kit.Store) {
		s := newStore(t, ks)
		for _, sc := range scenarios {
			t.Run(sc.name, func(t *testing.T) { sc.run(t, s) })
		}
	})
}

// store is one running server of a backend, with a client to read it
// directly.
type store struct {
	*kit.Store
	etcd  *clientv3.Client      // when the backend is etcd of either kind
	redis redis.UniversalClient // when it is Redis of any kind but a Redlock quorum
	// redlock: a client of each server of a Redlock quorum, which holds a
	// copy of the election's state of its own (keys electd:{NAME}:rl:…).
	redlock []*redis.Client
}

// newStore makes the client of s, closed when t ends.
func newStore(t *testing.T, s *kit.Store) *store {
	switch {
	case s.IsEtcd():
		return &store{Store: s, etcd: s.EtcdClient(t)}
	case s.Redlock != nil:
		return &store{Store: s, redlock: s.RedisServers(t)}
	}
	return &store{Store: s, redis: s.RedisClient(t)}
}

// queued counts the candidates the store holds for election; on a
// Redlock quorum, the most any server holds alive (every server must be
// clean for 0): those whose lease there has not lapsed by its clock. A
// candidate's renewal that a partition held back (a proxy delivers what it
// held on Heal, as TCP does after a healed partition) may reach a server
// after the candidate left it: the server takes the entry back, by design
// (a server that lost an entry takes it back at its next step), for one
// TTL, and keeps it, dead, until a step of another candidate prunes it.
func (s *store) queued(t *testing.T, election string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var n int64
	var err error
	switch {
	case s.redlock != nil:
		for _, c := range s.redlock {
			var m int64
			if m, err = liveEntries(ctx, c, "electd:{"+election+"}:rl:expiry"); err != nil {
				err = fmt.Errorf("%s: %w", c.Options().Addr, err)
				break
			}
			n = max(n, m)
		}
	case s.etcd != nil:
		var resp *clientv3.GetResponse
		resp, err = s.etcd.Get(ctx, "/electd/elections/"+election+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
		if err == nil {
			n = resp.Count
		}
	default:
		n, err = s.redis.ZCard(ctx, "electd:{"+election+"}:queue").Result()
	}
	if err != nil {
		t.Fatalf("count candidates: %v", err)
	}
	return int(n)
}

// liveEntries counts the members of the sorted set expiry (entry → lease
// deadline in the server's microseconds) whose deadline is after the
// server's TIME.
func liveEntries(ctx context.Context, c *redis.Client, expiry string) (int64, error) {
	now, err := c.Time(ctx).Result()
	if err != nil {
		return 0, err
	}
	return c.ZCount(ctx, expiry, fmt.Sprintf("(%d", now.UnixMicro()), "+inf").Result()
}

// runRecord is the --once-per run record as the store holds it (JSON).
type runRecord struct {
	ID       string    `json:"id"`
	Token    uint64    `json:"fencing_token"`
	Finished time.Time `json:"finished"`
}

// lastRun reads the --once-per run record of election (nil when there is
// none); on a Redlock quorum, the newest any server holds (as electd
// reads it).
func (s *store) lastRun(t *testing.T, election string) *runRecord {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	var b []byte
	switch {
	case s.redlock != nil:
		var newest *runRecord
		for _, c := range s.redlock {
			b, err := c.Get(ctx, "electd:{"+election+"}:rl:lastrun").Bytes()
			if errors.Is(err, redis.Nil) {
				continue
			}
			if err != nil {
				t.Fatalf("read the run record on %s: %v", c.Options().Addr, err)
			}
			r := decodeRun(t, b)
			if newest == nil || r.Finished.After(newest.Finished) {
				newest = r
			}
		}
		return newest
	case s.etcd != nil:
		resp, err := s.etcd.Get(ctx, "/electd/runs/"+election)
		if err != nil {
			t.Fatalf("read the run record: %v", err)
		}
		if len(resp.Kvs) == 0 {
			return nil
		}
		b = resp.Kvs[0].Value
	default:
		var err error
		b, err = s.redis.Get(ctx, "electd:{"+election+"}:lastrun").Bytes()
		if errors.Is(err, redis.Nil) {
			return nil
		}
		if err != nil {
			t.Fatalf("read the run record: %v", err)
		}
	}
	return decodeRun(t, b)
}

func decodeRun(t *testing.T, b []byte) *runRecord {
	t.Helper()
	var r runRecord
	if err := json.Unmarshal(b, &r); err != nil {
		t.Fatalf("run record %q: %v", b, err)
	}
	return &r
}
