package zk

import (
	"context"
	"errors"
	"fmt"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
)

var _ elector.Switcher = (*Elector)(nil)

// A switchover hands the term to a named candidate although others wait
// ahead of it. Sequential nodes cannot be moved in line, so the election
// keeps a handover node (NAME/handover, persistent) naming the target's
// node: its sequence number is the election's floor. A node below the
// floor is passed: it does not count in line, and its candidate queues
// again (a new node, behind the target) as soon as it sees the floor. The
// target is then the first node at or above the floor, and leads; the
// resignation and the handover are one transaction (multi), with a check
// that the target's node still exists.
//
// Tokens keep growing: a node's creation zxid grows with its sequence
// number, every term after the switchover is held by a node at or above
// the floor, and the floor only rises (a later target stands behind a
// later leader). Waiters watch the handover node besides the nodes just
// ahead: a switchover wakes every waiter once (a resignation still wakes
// only the successor). Passed candidates queue again in the order they
// see the floor, which may differ from their old order.

// handoverNode names the election's handover node.
const handoverNode = "handover"

// lineup is one reading of the election: its candidate nodes in
// sequence order, and the floor a switchover set (0 for none).
type lineup struct {
	all   []string
	floor uint64
	hzxid int64 // the handover node's Mzxid as read (0: none)
}

// eligible are the nodes at or above the floor: the line that counts.
func (l lineup) eligible() []string {
	var out []string
	for _, n := range l.all {
		if seq, _ := seqOf(n); seq >= l.floor {
			out = append(out, n)
		}
	}
	return out
}

// line reads the candidate nodes, then the handover node: a switchover
// deletes the leader's node and writes the handover in one transaction,
// so a listing without the old leader is followed by a read of the new
// floor.
func (e *Elector) line(ctx context.Context, s *session) (lineup, error) {
	all, err := e.children(ctx, s)
	if err != nil {
		return lineup{}, err
	}
	type handover struct {
		b  []byte
		st *zk.Stat
	}
	h, err := do(ctx, s, func(z *zk.Conn) (handover, error) {
		b, st, err := z.Get(e.base + "/" + handoverNode)
		return handover{b, st}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return lineup{all: all}, nil
	case err != nil:
		return lineup{}, fmt.Errorf("read the handover node: %w", err)
	}
	floor, _ := seqOf(string(h.b))
	return lineup{all: all, floor: floor, hzxid: h.st.Mzxid}, nil
}

// Queued reports whether a candidate with this ID waits in line (at or
// above the floor, not the first: the leader).
func (e *Elector) Queued(ctx context.Context, id string) error {
	s, err := e.ready(ctx)
	if err != nil {
		return storeErr("switchover", err)
	}
	target, err := e.newestOf(ctx, s, id)
	if err != nil {
		return &elector.StoreError{Op: "switchover", Err: err, Permanent: permanent(err)}
	}
	if target == "" {
		return &elector.NotQueuedError{ID: id}
	}
	return nil
}

// newestOf is the newest waiting node of candidate id, or "": a restarted
// copy's node comes after its dead predecessor's.
func (e *Elector) newestOf(ctx context.Context, s *session, id string) (string, error) {
	l, err := e.line(ctx, s)
	if err != nil {
		return "", err
	}
	el := l.eligible()
	for i := len(el) - 1; i >= 1; i-- {
		d, _, ok, err := e.node(ctx, s, el[i])
		if err != nil {
			return "", err
		}
		if ok && d.ID == id {
			return el[i], nil
		}
	}
	return "", nil
}

// handTo deletes own (the ended term's node) and names candidate id's
// newest node in the handover node, in one transaction that checks that
// node still exists; if id is no longer queued, it resigns plainly and
// returns a *NotQueuedError.
func (e *Elector) handTo(ctx context.Context, s *session, own, id string) error {
	for {
		target, err := e.newestOf(ctx, s, id)
		if err != nil {
			e.leave(s, own)
			return &elector.StoreError{Op: "switchover", Err: err, Permanent: permanent(err)}
		}
		if target == "" {
			e.leave(s, own)
			return &elector.NotQueuedError{ID: id}
		}
		hp := e.base + "/" + handoverNode
		exists, err := do(ctx, s, existsOf(hp))
		if err != nil {
			e.leave(s, own)
			return &elector.StoreError{Op: "switchover", Err: err}
		}
		var write any = &zk.CreateRequest{Path: hp, Data: []byte(target), Acl: e.cfg.Store.acl()}
		if exists {
			write = &zk.SetDataRequest{Path: hp, Data: []byte(target), Version: -1}
		}
		res, err := do(ctx, s, func(z *zk.Conn) ([]zk.MultiResponse, error) {
			return z.Multi(&zk.DeleteRequest{Path: e.base + "/" + own, Version: -1},
				&zk.CheckVersionRequest{Path: e.base + "/" + target, Version: -1}, write)
		})
		switch {
		case err == nil:
			e.log.Info("switchover: handed the term over", "to", id, "node", target)
			return nil
		case len(res) == 3 && errors.Is(res[1].Error, zk.ErrNoNode):
			continue // the target's node went meanwhile: look again
		case len(res) == 3 && (errors.Is(res[2].Error, zk.ErrNodeExists) || errors.Is(res[2].Error, zk.ErrNoNode)):
			continue // the handover node came or went meanwhile
		}
		e.leave(s, own)
		return &elector.StoreError{Op: "switchover", Err: err, Permanent: permanent(err)}
	}
}
