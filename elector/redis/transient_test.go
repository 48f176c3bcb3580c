package redis

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// storeFault makes a real redis-server refuse the election's writes with
// one class of error until lift is called.
type storeFault struct {
	name   string
	class  string // what the elector must classify the refusals as
	inject func(t *testing.T, cli *redis.Client) (lift func())
}

var storeFaults = []storeFault{
	{name: "cannot persist", class: "MISCONF", inject: injectMISCONF},
	{name: "out of memory", class: "OOM", inject: injectOOM},
	{name: "demoted to replica", class: "READONLY", inject: injectREADONLY},
	{name: "busy script", class: "BUSY", inject: injectBUSY},
}

// TestTransientErrorsKeepTheTerm: while the store refuses writes for less
// than the lease (the disk is full, memory is short, the server was
// demoted, a script hogs it), the leader's renewals fail and are retried,
// and its term survives: only the deadline or the store's word ends it. The
// waiter's campaign survives too, and the failures are counted by class.
func TestTransientErrorsKeepTheTerm(t *testing.T) {
	for _, f := range storeFaults {
		t.Run(f.name, func(t *testing.T) {
			srv, cli := startRedis(t)
			ctx := context.Background()
			inst := &countingInstrument{}
			mk := func(id string) *Elector {
				return newElectorWith(t, Config{Client: newClient(t, srv.Addr()), Candidate: elector.Candidate{
					Election: "transient", ID: id, Timing: testTiming(), Instrument: inst}})
			}
			a, b := mk("a"), mk("b")
			ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 5*testTTL, "a")
			cb := electortest.Campaign(ctx, b)
			waitQueued(t, cli, "transient", 2)

			lift := f.inject(t, cli)
			electortest.Eventually(t, testTTL, "renewals refused with "+f.class, func() bool {
				return inst.count("renew", f.class) >= 2
			})
			lift()
			if err := ra.Term.Err(); err != nil {
				t.Fatalf("term ended during a %s refusal shorter than the lease: %v", f.class, err)
			}
			// Renewals go through again: the term outlives its lease.
			end := time.Now().Add(2 * testTTL)
			electortest.Eventually(t, 2*testTTL, "the lease to be renewed past the fault", func() bool {
				return ra.Term.ValidUntil().After(end.Add(-testTTL))
			})
			if err := ra.Term.Err(); err != nil {
				t.Fatalf("term ended after the %s refusal was lifted: %v", f.class, err)
			}
			electortest.StillWaiting(t, cb, "b")
			t.Logf("%s: %d renewal errors, classes %v", f.class, inst.n.Load(), inst.snapshot())
			electortest.Resign(t, ra.Term)
			electortest.Resign(t, electortest.MustLead(t, cb, 2*testTTL, "b").Term)
		})
	}
}

// TestLongRefusalEndsAtTheDeadline: a refusal that outlasts the lease ends
// the term by its deadline (ErrLeaseExpired), not before and not by the
// error.
func TestLongRefusalEndsAtTheDeadline(t *testing.T) {
	srv, cli := startRedis(t)
	a := newElector(t, srv.Addr(), "refused", "a")
	ra := electortest.MustLead(t, electortest.Campaign(context.Background(), a), 5*testTTL, "a")
	lift := injectMISCONF(t, cli)
	defer lift()
	select {
	case <-ra.Term.Done():
	case <-time.After(3 * testTTL):
		t.Fatal("term outlived its deadline while every renewal was refused")
	}
	if err := ra.Term.Err(); !errors.Is(err, elector.ErrLeaseExpired) {
		t.Fatalf("term ended with %v, want the deadline (%v)", err, elector.ErrLeaseExpired)
	}
}

// injectMISCONF makes the server's snapshots fail (its directory is gone)
// with stop-writes-on-bgsave-error on, as a full disk does: every write is
// refused with MISCONF.
func injectMISCONF(t *testing.T, cli *redis.Client) func() {
	t.Helper()
	ctx := context.Background()
	dir := filepath.Join(t.TempDir(), "rdb")
	must(t, os.Mkdir(dir, 0o755))
	must(t, cli.ConfigSet(ctx, "dir", dir).Err())
	must(t, cli.ConfigSet(ctx, "save", "3600 1").Err())
	must(t, cli.ConfigSet(ctx, "stop-writes-on-bgsave-error", "yes").Err())
	must(t, os.RemoveAll(dir))
	must(t, cli.BgSave(ctx).Err())
	electortest.Eventually(t, 5*time.Second, "the snapshot to fail", func() bool {
		return cli.Set(ctx, "probe", "x", 0).Err() != nil
	})
	return func() {
		must(t, os.Mkdir(dir, 0o755))
		must(t, cli.ConfigSet(ctx, "dir", dir).Err())
		must(t, cli.BgSave(ctx).Err())
		electortest.Eventually(t, 5*time.Second, "a snapshot to succeed", func() bool {
			return cli.Set(ctx, "probe", "x", 0).Err() == nil
		})
	}
}

// injectOOM sets maxmemory below what the server uses, with noeviction.
func injectOOM(t *testing.T, cli *redis.Client) func() {
	t.Helper()
	ctx := context.Background()
	must(t, cli.ConfigSet(ctx, "maxmemory-policy", "noeviction").Err())
	must(t, cli.ConfigSet(ctx, "maxmemory", "1").Err())
	return func() { must(t, cli.ConfigSet(ctx, "maxmemory", "0").Err()) }
}

// injectREADONLY demotes the server to a replica of a master that does not
// answer: it keeps its data and refuses writes with READONLY, as a demoted
// master does after a failover, until it is promoted again.
func injectREADONLY(t *testing.T, cli *redis.Client) func() {
	t.Helper()
	ctx := context.Background()
	must(t, cli.ConfigSet(ctx, "replica-serve-stale-data", "yes").Err())
	must(t, cli.SlaveOf(ctx, "127.0.0.1", strconv.Itoa(testenv.FreePort(t))).Err())
	return func() { must(t, cli.SlaveOf(ctx, "NO", "ONE").Err()) }
}

// injectBUSY runs a script that loops until killed, with a busy threshold
// of 100 ms: every other command is answered BUSY meanwhile.
func injectBUSY(t *testing.T, cli *redis.Client) func() {
	t.Helper()
	ctx := context.Background()
	must(t, cli.ConfigSet(ctx, "busy-reply-threshold", "100").Err())
	hog := redis.NewClient(&redis.Options{Addr: cli.Options().Addr, MaxRetries: -1})
	done := make(chan error, 1)
	go func() { done <- hog.Eval(ctx, "while true do end", nil).Err() }()
	return func() {
		killer := redis.NewClient(&redis.Options{Addr: cli.Options().Addr, MaxRetries: -1})
		defer killer.Close()
		electortest.Eventually(t, 5*time.Second, "the script to be killed", func() bool {
			return killer.ScriptKill(ctx).Err() == nil
		})
		if err := <-done; err == nil {
			t.Errorf("the busy script ended without an error")
		}
		must(t, hog.Close())
	}
}

func must(t *testing.T, err error) {
	t.Helper()
	if err != nil {
		t.Fatal(err)
	}
}
