package etcd

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
)

var _ elector.Switcher = (*Elector)(nil)

// A switchover hands the term to a named candidate C in one transaction:
// it deletes the leader's key and the keys of the candidates queued ahead
// of C, provided none of those keys, nor C's, changed since the leader read
// the queue. C, which watches the key just ahead of it, sees that deletion
// and finds its own key the first of the election (firstNow): it leads,
// with its key's create revision as the token, greater than the leader's.
// No other candidate can be first at that revision, so nothing is left to
// a race. The candidates whose keys were deleted see their own key gone
// while their session holds (errSteppedAside) and queue again at once,
// with a new key: behind C, and behind every candidate queued then.
//
// As with Resign, the leader's key goes only after the supervisor stopped
// its child (Term.ResignTo ends the term first).

// errSteppedAside: the candidate's key was deleted while its session held,
// by a switchover to a candidate behind it. The campaign queues again.
var errSteppedAside = fmt.Errorf("%w: its key was removed for a switchover to a candidate behind it", errNotHead)

// maxStepAside bounds the keys one switchover deletes, below etcd's
// default --max-txn-ops (128).
const maxStepAside = 100

// Queued reports whether a candidate with this ID waits behind the head of
// the election.
func (e *Elector) Queued(ctx context.Context, id string) error {
	if e.Slots() != 1 {
		return fmt.Errorf("switchover: election %q has %d slots; a switchover needs --slots 1", e.name, e.Slots())
	}
	kvs, _, err := e.queue(ctx)
	if err != nil {
		return err
	}
	if target(kvs, id) < 0 {
		return &elector.NotQueuedError{ID: id}
	}
	return nil
}

// queue reads the election's keys in queue order, and the revision read.
func (e *Elector) queue(ctx context.Context) ([]*mvccpb.KeyValue, int64, error) {
	g, err := e.readQueue(ctx)
	if err != nil {
		return nil, 0, e.storeErr("switchover", err)
	}
	return g.Kvs, g.Header.Revision, nil
}

// readQueue reads the election's keys in one range request, in the order
// of their creation (the queue's), within the store's request timeout.
func (e *Elector) readQueue(ctx context.Context) (*clientv3.GetResponse, error) {
	gctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	return e.client.Get(gctx, e.pfx, clientv3.WithPrefix(),
		clientv3.WithSort(clientv3.SortByCreateRevision, clientv3.SortAscend))
}

// target is the index of the last candidate behind the head with this ID
// (its newest key: a copy that crashed and came back under the same ID
// queued again behind its old key, which lasts until its lease lapses, and
// is passed like any key ahead of the target), or -1.
func target(kvs []*mvccpb.KeyValue, id string) int {
	for i := len(kvs) - 1; i > 0; i-- {
		if decodeValue(kvs[i].Value).ID == id {
			return i
		}
	}
	return -1
}

// handTo hands s's ended term to candidate id (see above), then revokes
// s's lease. If that cannot be done (id left the queue, s no longer heads
// it, the store fails), the revocation alone resigns plainly: the next in
// line leads, and the error says why the named one does not.
func (e *Elector) handTo(ctx context.Context, s *session, id string) error {
	err := e.stepAside(ctx, s, id)
	if err != nil {
		e.log.Warn("switchover failed; resigning to the next in line", "to", id, "err", err)
	}
	// The revocation gets time of its own: the switchover may have spent
	// the caller's on a slow store, and nothing else revokes a resigned
	// session's lease (renewLoop leaves it to the term's resignation), so
	// a revocation not sent would keep the key, and the queue, one TTL.
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opTimeout())
	defer cancel()
	return errors.Join(err, s.release(rctx))
}

// stepAside runs the switchover's transaction, reading the queue again
// if it changed in between (a few times: a busy queue is resigned plainly).
func (e *Elector) stepAside(ctx context.Context, s *session, id string) error {
	for range 3 {
		kvs, _, err := e.queue(ctx)
		if err != nil {
			return err
		}
		if len(kvs) == 0 || !holds(kvs[:1], s.key, s.rev) {
			return errors.New("switchover: this candidate no longer heads the election")
		}
		j := target(kvs, id)
		if j < 0 {
			return &elector.NotQueuedError{ID: id}
		}
		if j > maxStepAside {
			return fmt.Errorf("switchover: %d candidates are queued ahead of %q, more than the %d one switchover moves", j-1, id, maxStepAside)
		}
		cmps := []clientv3.Cmp{clientv3.Compare(clientv3.CreateRevision(s.key), "=", s.rev)}
		ops := []clientv3.Op{clientv3.OpDelete(s.key)}
		for _, kv := range kvs[1 : j+1] {
			cmps = append(cmps, clientv3.Compare(clientv3.CreateRevision(string(kv.Key)), "=", kv.CreateRevision))
		}
		for _, kv := range kvs[1:j] {
			ops = append(ops, clientv3.OpDelete(string(kv.Key)))
		}
		tctx, cancel := context.WithTimeout(ctx, e.opTimeout())
		resp, err := e.client.Txn(tctx).If(cmps...).Then(ops...).Commit()
		cancel()
		if err != nil {
			if e.handedTo(ctx, s, kvs[j]) {
				e.log.Info("handed the term over (the store's answer was lost; a read shows it)", "to", id, "key", string(kvs[j].Key))
				return nil
			}
			return e.storeErr("switchover", err)
		}
		if resp.Succeeded {
			e.log.Info("handed the term over", "to", id, "key", string(kvs[j].Key), "stepped_aside", j-1, "at_rev", resp.Header.Revision)
			return nil
		}
		e.log.Debug("the queue changed during the switchover; reading it again", "to", id)
	}
	return errors.New("switchover: the queue kept changing")
}

// handedTo reports whether a read shows the switchover's transaction
// landed though its answer was lost: s's key gone and the target's key,
// unchanged, first in the election.
func (e *Elector) handedTo(ctx context.Context, s *session, to *mvccpb.KeyValue) bool {
	kvs, _, err := e.queue(ctx)
	return err == nil && len(kvs) > 0 && !holds(kvs, s.key, s.rev) &&
		string(kvs[0].Key) == string(to.Key) && kvs[0].CreateRevision == to.CreateRevision
}
