package zk

import (
	"context"
	"time"

	"github.com/electd/electd/elector"
)

// Queue reads the election's candidate nodes in line (one listing, then
// one read per node): the first Slots hold, each with its token (its
// node's creation zxid, which a waiter will lead with too), its term's
// start once written, and its arrival (the node's ctime, by the server's
// clock). ZooKeeper says nothing of a session's expiry: Expires is zero.
func (e *Elector) Queue(ctx context.Context) (elector.Queue, error) {
	s, err := e.ready(ctx)
	if err != nil {
		return elector.Queue{}, storeErr("status", err)
	}
	lu, err := e.line(ctx, s)
	if err != nil {
		return elector.Queue{}, storeErr("status", err)
	}
	l := lu.eligible() // a passed node (below a switchover's floor) is about to queue again
	q := elector.Queue{Slots: 1}
	for _, name := range l {
		d, st, ok, err := e.node(ctx, s, name)
		if err != nil {
			return elector.Queue{}, storeErr("status", err)
		}
		if !ok {
			continue // left meanwhile
		}
		if len(q.Candidates) == 0 {
			q.Slots = d.Slots
		}
		seq, _ := seqOf(name)
		c := elector.Queued{ID: d.ID, Address: d.Address, Order: seq, Token: uint64(st.Czxid),
			Arrived: time.UnixMilli(st.Ctime)}
		if len(q.Candidates) < q.Slots && !d.Since.IsZero() { // a holder has written its term's start
			c.Holder, c.Since = true, d.Since
		}
		q.Candidates = append(q.Candidates, c)
	}
	return q, nil
}
