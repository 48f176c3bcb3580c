package redlock

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/electortest"
)

// TestQueueMajority: Queue shows what a majority of the servers agrees
// on. An entry on one server of three (a join that reached a minority) is
// not shown; with one server cut off the line is still read from the
// other two, and the agreement says so; with two cut off there is no
// majority, and Queue fails with a store error that a retry may fix.
func TestQueueMajority(t *testing.T) {
	h := newHarness(t, 3)
	el := faultElection(t)
	ctx := context.Background()
	ra := electortest.MustLead(t, electortest.Campaign(ctx, h.candidate(t, el, "a")), 10*faultTTL, "a")
	electortest.Campaign(ctx, h.candidate(t, el, "b"))
	k := keysFor(el)
	far := time.Now().Add(time.Hour).UnixMicro()
	if err := h.clis[0].Eval(ctx, `redis.call('ZADD', KEYS[1], ARGV[1], 'ghost#1'); redis.call('ZADD', KEYS[2], ARGV[1], 'ghost#1');
redis.call('HSET', KEYS[3], 'ghost#1', 'ghost\n')`, []string{k.queue, k.expiry, k.cand}, far).Err(); err != nil && !errors.Is(err, redis.Nil) {
		t.Fatal(err)
	}
	reader, ps := h.proxied(t, el, "reader")
	read := func() (elector.Queue, error) {
		ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
		defer cancel()
		return reader.(elector.Queuer).Queue(ctx)
	}
	ids := func(q elector.Queue) string {
		var s []string
		for _, c := range q.Candidates {
			s = append(s, c.ID)
		}
		return strings.Join(s, ",")
	}
	var q elector.Queue
	electortest.Eventually(t, 10*faultTTL, "a holding, b waiting, no ghost", func() bool {
		var err error
		q, err = read()
		return err == nil && ids(q) == "a,b"
	})
	if !q.Candidates[0].Holder || q.Candidates[0].Token != ra.Term.Token || q.Candidates[1].Holder ||
		!strings.HasPrefix(q.Agreement, "3 of 3 servers answered") {
		t.Fatalf("read %+v", q)
	}
	ps[0].Cut()
	if q, err := read(); err != nil || ids(q) != "a,b" || !strings.HasPrefix(q.Agreement, "2 of 3 servers answered") {
		t.Fatalf("with server 0 cut off: %+v, %v; want a, b read from 2 of 3", q, err)
	}
	ps[1].Cut()
	_, err := read()
	var se *elector.StoreError
	if !errors.As(err, &se) || se.Permanent || !strings.Contains(err.Error(), "1 of 3 servers answered, a majority is 2") {
		t.Fatalf("with two servers cut off: %v; want a transient store error naming the missing majority", err)
	}
}
