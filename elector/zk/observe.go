package zk

import (
	"context"
	"errors"
	"reflect"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// Observe sends the current leader and every change, driven by watches:
// one on the election's children (a leader arriving or leaving) and one
// on the leader's node (its term's start, written when it begins).
func (e *Elector) Observe(ctx context.Context) <-chan elector.Leader {
	out := make(chan elector.Leader, 1)
	ok := e.spawn(func() {
		defer close(out)
		var last elector.Leader
		first := true
		for {
			l, watches, err := e.observeOnce(ctx)
			if err == nil && (first || !l.Equal(last)) {
				select {
				case out <- l:
				case <-ctx.Done():
					return
				case <-e.closed:
					return
				}
				last, first = l, false
			}
			cases := []reflect.SelectCase{
				{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(ctx.Done())},
				{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(e.closed)},
			}
			var retry clock.Timer
			if err != nil && !errors.Is(err, errPending) {
				e.log.Debug("observe: store error, reading again", "err", err)
				retry = e.cfg.Clock.NewTimer(retryDelay)
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(retry.C())})
			}
			for _, w := range watches {
				cases = append(cases, reflect.SelectCase{Dir: reflect.SelectRecv, Chan: reflect.ValueOf(w)})
			}
			i, _, _ := reflect.Select(cases)
			if retry != nil {
				retry.Stop()
			}
			if i < 2 {
				return
			}
		}
	})
	if !ok { // closed: no leader is sent
		close(out)
	}
	return out
}

// observeOnce reads the leader and sets the watches that tell of its
// change: on the election's children (or its creation) and on the
// leader's node.
func (e *Elector) observeOnce(ctx context.Context) (elector.Leader, []<-chan zk.Event, error) {
	s, err := e.session()
	if err != nil {
		return elector.Leader{}, nil, err
	}
	if _, err := s.ready(ctx); err != nil {
		return elector.Leader{}, nil, err
	}
	type kids struct {
		names []string
		ch    <-chan zk.Event
	}
	k, err := do(ctx, s, func(z *zk.Conn) (kids, error) {
		names, _, ch, err := z.ChildrenW(e.base)
		if errors.Is(err, zk.ErrNoNode) {
			// Not created yet: watch for its creation.
			var ok bool
			ok, _, ch, err = z.ExistsW(e.base)
			if err == nil && ok {
				return kids{}, errors.New("election node created meanwhile")
			}
		}
		return kids{names, ch}, err
	})
	if err != nil {
		return elector.Leader{}, nil, err
	}
	// The handover node, read after the listing, sets the floor; the
	// children watch fires on a switchover too (the leader's node goes).
	floor, err := do(ctx, s, func(z *zk.Conn) ([]byte, error) {
		b, _, err := z.Get(e.base + "/" + handoverNode)
		if errors.Is(err, zk.ErrNoNode) {
			return nil, nil
		}
		return b, err
	})
	if err != nil {
		return elector.Leader{}, []<-chan zk.Event{k.ch}, err
	}
	fl, _ := seqOf(string(floor))
	l := lineup{all: line(k.names), floor: fl}.eligible()
	if len(l) == 0 {
		return elector.Leader{}, []<-chan zk.Event{k.ch}, nil
	}
	type leader struct {
		b  []byte
		st *zk.Stat
		ch <-chan zk.Event
	}
	r, err := do(ctx, s, func(z *zk.Conn) (leader, error) {
		b, st, ch, err := z.GetW(e.base + "/" + l[0])
		return leader{b, st, ch}, err
	})
	if err != nil {
		// Gone meanwhile (the children watch fires) or a store error.
		return elector.Leader{}, []<-chan zk.Event{k.ch}, err
	}
	d := decode(r.b)
	if d.Since.IsZero() {
		// First in line, its term not begun (it writes its start before
		// it leads): nothing to tell until the data watch fires.
		return elector.Leader{}, []<-chan zk.Event{k.ch, r.ch}, errPending
	}
	return leaderOf(d, r.st), []<-chan zk.Event{k.ch, r.ch}, nil
}

// errPending: the first node in line has not begun its term yet.
var errPending = errors.New("the first candidate has not begun its term")
