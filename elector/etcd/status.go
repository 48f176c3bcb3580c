package etcd

import (
	"context"

	"github.com/electd/electd/elector"
)

var _ elector.Queuer = (*Elector)(nil)

// Queue reads the election's keys in one range request, in the order of
// their creation. The first Slots keys hold (a key's create revision is
// its fencing token, fixed when it queues, so a waiter's token is known
// too). etcd records no arrival time, and a lease's deadline would take
// a request per candidate: both are left zero. Like every Queue, it
// reports nothing to the Instrument: a reading on demand must not leave
// a failure behind in /healthz that no later reading clears.
func (e *Elector) Queue(ctx context.Context) (elector.Queue, error) {
	resp, err := e.readQueue(ctx)
	if err != nil {
		err = elector.Classify(errorClass(err), err)
		return elector.Queue{}, &elector.StoreError{Op: "status", Err: err, Permanent: permanent(err)}
	}
	q := elector.Queue{Slots: 1, Candidates: make([]elector.Queued, 0, len(resp.Kvs))}
	for i, kv := range resp.Kvs {
		v := decodeValue(kv.Value)
		if i == 0 {
			q.Slots = v.slots() // every candidate was checked against those ahead
		}
		c := elector.Queued{ID: v.ID, Address: v.Address, Order: uint64(kv.CreateRevision), Token: uint64(kv.CreateRevision)}
		if i < q.Slots {
			c.Holder, c.Since = true, v.Since
		}
		q.Candidates = append(q.Candidates, c)
	}
	return q, nil
}
