package redlock

import (
	"cmp"
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediskit"
)

var _ elector.Queuer = (*Elector)(nil)

// Queue asks every server for its line at once (one read-only script call
// each, rediskit.ReadLine) and needs a majority's answers. It shows what a
// majority agrees on: a candidate that a majority of all servers lists
// live, in the queues' common order (the candidate's campaign start, by
// its own clock: its arrival time), and as holder a candidate that a
// majority names with one committed token. Its lease expires when the
// m-th latest of those servers' deadlines passes. A candidate whose join
// reached a minority only is not shown; a term mid-handover may show no
// holder for a moment.
func (e *Elector) Queue(ctx context.Context) (elector.Queue, error) {
	if e.ctx.Err() != nil {
		return elector.Queue{}, elector.ErrClosed
	}
	n := len(e.cfg.Servers)
	lines := make([]rediskit.Line, n)
	nows := make([]time.Time, n)
	errs := e.onEach(func(i int, c redis.UniversalClient) error {
		rctx, cancel := e.request(ctx, i)
		defer cancel()
		k := e.keys
		l, err := rediskit.ReadLine(rctx, c, k.queue, k.expiry, k.cand, k.term)
		e.patience[i].Observe(err)
		if err != nil {
			return err
		}
		lines[i], nows[i] = l, e.cfg.Clock.Now()
		return nil
	})
	if err := e.quorumErr(errs); err != nil {
		return elector.Queue{}, &elector.StoreError{Op: "status", Err: err, Permanent: rediskit.IsPermanent(err)}
	}
	type agreed struct {
		c       elector.Queued
		expires []time.Time      // per server that lists it live
		terms   map[uint64][]int // committed token → the servers that name it
		since   map[uint64]time.Time
	}
	byEntry := map[string]*agreed{}
	answered := 0
	for i, l := range lines {
		if errs[i] != nil {
			continue
		}
		answered++
		for _, en := range l.Entries {
			a := byEntry[en.Entry]
			if a == nil {
				a = &agreed{c: elector.Queued{ID: en.ID, Address: en.Address, Order: en.Order, Arrived: time.UnixMicro(int64(en.Order))},
					terms: map[uint64][]int{}, since: map[uint64]time.Time{}}
				byEntry[en.Entry] = a
			}
			q := en.Queued(l.At, nows[i])
			a.expires = append(a.expires, q.Expires)
			if en.Token != 0 {
				a.terms[en.Token] = append(a.terms[en.Token], i)
				a.since[en.Token] = en.Since
			}
		}
	}
	q := elector.Queue{Slots: 1, Agreement: fmt.Sprintf("%d of %d servers answered; shown: the candidates a majority (%d) lists live, and as holder one a majority names with one committed token",
		answered, n, e.m)}
	for _, a := range byEntry {
		if len(a.expires) < e.m {
			continue
		}
		slices.SortFunc(a.expires, func(x, y time.Time) int { return y.Compare(x) })
		a.c.Expires = a.expires[e.m-1]
		for tok, servers := range a.terms {
			if len(servers) >= e.m {
				a.c.Holder, a.c.Token, a.c.Since = true, tok, a.since[tok]
			}
		}
		q.Candidates = append(q.Candidates, a.c)
	}
	slices.SortFunc(q.Candidates, func(x, y elector.Queued) int {
		return cmp.Or(cmp.Compare(x.Order, y.Order), cmp.Compare(x.ID, y.ID))
	})
	return q, nil
}
