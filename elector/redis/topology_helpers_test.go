package redis

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/internal/testenv"
)

// Helpers of the tests on real Sentinel and Cluster topologies
// (topology_test.go).

// candidates makes one candidate per id of election, each on its own
// connection dialed by b from url, as one electd per host would. Each
// counts its store errors in its own instrument (returned by id) and in
// inst, if not nil.
func candidates(t *testing.T, b backend.Backend, url string, election string, timing elector.Timing, inst *countingInstrument, ids ...string) ([]elector.Elector, map[string]*countingInstrument) {
	t.Helper()
	var out []elector.Elector
	own := map[string]*countingInstrument{}
	for _, id := range ids {
		own[id] = &countingInstrument{}
		tee := teeInstrument{own[id]}
		if inst != nil {
			tee = append(tee, inst)
		}
		out = append(out, electortest.DialURL(t, b, url, elector.Candidate{
			Election: election, ID: id, Address: "http://" + id + ".test", Timing: timing, Instrument: tee}))
	}
	return out, own
}

// teeInstrument reports to each of its instruments.
type teeInstrument []elector.Instrument

func (ti teeInstrument) StoreError(op string, err error) {
	for _, i := range ti {
		i.StoreError(op, err)
	}
}

func (ti teeInstrument) StoreAnswered(op string) {
	for _, i := range ti {
		i.StoreAnswered(op)
	}
}

func (ti teeInstrument) Renewed(took time.Duration) {
	for _, i := range ti {
		i.Renewed(took)
	}
}

// sentinelURL is redis+sentinel://S1,S2,S3/MASTER of s, or of those of
// its sentinels given.
func sentinelURL(s *testenv.Sentinel, sentinels ...string) string {
	if len(sentinels) == 0 {
		sentinels = s.SentinelAddrs()
	}
	return "redis+sentinel://" + strings.Join(sentinels, ",") + "/" + s.MasterName()
}

// clusterURL is redis+cluster://N1,…,N6 of c.
func clusterURL(c *testenv.Cluster) string { return "redis+cluster://" + strings.Join(c.Addrs(), ",") }

// electionSlot is the cluster slot of election's keys.
func electionSlot(election string) int { return testenv.Slot(keysFor(election).queue) }

// renewed waits for term's next acknowledged renewal (its ValidUntil
// moves) and returns when it saw it, within a poll of the ack.
func renewed(t *testing.T, term *elector.Term) time.Time {
	t.Helper()
	vu := term.ValidUntil()
	electortest.Eventually(t, testTTL, "a renewal of the leader", func() bool { return term.ValidUntil().After(vu) })
	if err := term.Err(); err != nil {
		t.Fatalf("term ended: %v", err)
	}
	return time.Now()
}

// stillLeads fails the test unless s is the one term held now and no
// other term started since s did.
func stillLeads(t *testing.T, terms *electortest.Terms, s electortest.Span, what string) {
	t.Helper()
	if err := s.Term.Err(); err != nil {
		t.Fatalf("%s: %s's term ended: %v", what, s.ID, err)
	}
	if cur, ok := terms.Leading(); !ok || cur.Token != s.Token {
		t.Fatalf("%s: terms held now %v, want only %s", what, terms.Open(), s)
	}
	if ended := terms.Ended(); len(ended) > 0 && ended[len(ended)-1].Start.After(s.Start) {
		t.Fatalf("%s: a term began while %s led: %s", what, s.ID, ended[len(ended)-1])
	}
}

// signal sends sig to each node's process.
func signal(t *testing.T, sig syscall.Signal, nodes ...*testenv.RedisNode) {
	t.Helper()
	for _, n := range nodes {
		if err := syscall.Kill(n.Pid(), sig); err != nil {
			t.Fatalf("signal %v to %s: %v", sig, n, err)
		}
	}
}

// injectUnpersistable makes the node behind cli refuse writes with
// MISCONF, as a full disk does: its snapshots fail, with
// stop-writes-on-bgsave-error on. Unlike injectMISCONF it keeps the
// node's directory (a cluster node keeps nodes.conf there, and exits if
// it cannot rewrite it): the snapshot's file name is a directory, so the
// rename that ends each snapshot fails.
func injectUnpersistable(t *testing.T, cli *redis.Client) (lift func()) {
	t.Helper()
	ctx := context.Background()
	conf, err := cli.ConfigGet(ctx, "dir").Result()
	must(t, err)
	name := fmt.Sprintf("misconf-%d.rdb", time.Now().UnixNano())
	path := filepath.Join(conf["dir"], name)
	must(t, os.Mkdir(path, 0o755))
	must(t, cli.ConfigSet(ctx, "dbfilename", name).Err())
	must(t, cli.ConfigSet(ctx, "save", "3600 1").Err())
	must(t, cli.ConfigSet(ctx, "stop-writes-on-bgsave-error", "yes").Err())
	bgsave := func(want string) {
		t.Helper()
		must(t, cli.BgSave(ctx).Err())
		electortest.Eventually(t, 5*time.Second, "a snapshot to end "+want, func() bool {
			s, err := cli.Info(ctx, "persistence").Result()
			return err == nil && strings.Contains(s, "rdb_bgsave_in_progress:0") &&
				strings.Contains(s, "rdb_last_bgsave_status:"+want)
		})
	}
	bgsave("err")
	return func() {
		must(t, os.Remove(path))
		bgsave("ok")
		// Back as the topology started it: no snapshots, none on disk
		// (a restart must come back empty).
		must(t, cli.ConfigSet(ctx, "save", "").Err())
		must(t, os.Remove(path))
	}
}

// replication returns a node's INFO replication fields.
func replication(t *testing.T, cli *redis.Client) map[string]string {
	t.Helper()
	s, err := cli.Info(context.Background(), "replication").Result()
	must(t, err)
	m := map[string]string{}
	for line := range strings.SplitSeq(s, "\n") {
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok {
			m[k] = v
		}
	}
	return m
}
