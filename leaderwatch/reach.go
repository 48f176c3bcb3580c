package leaderwatch

import (
	"context"
	"errors"
	"sync"
	"time"
)

// PingEvery is how often Probe pings the store in `leader --watch`: an
// etcd watch whose server went away waits to reconnect without a word.
const PingEvery = 2 * time.Second

// Reachability is an elector.Instrument that tells whether the store
// answers: it does not while any operation fails.
type Reachability struct {
	mu      sync.Mutex
	failing map[string]error // op → its last error
	changed chan struct{}    // a value when failing may have changed
}

// NewReachability returns a Reachability under which the store answers.
func NewReachability() *Reachability {
	return &Reachability{failing: map[string]error{}, changed: make(chan struct{}, 1)}
}

// StoreError records that op fails.
func (r *Reachability) StoreError(op string, err error) {
	if errors.Is(err, context.Canceled) {
		return // electd is stopping
	}
	r.mu.Lock()
	r.failing[op] = err
	r.mu.Unlock()
	r.notify()
}

// Renewed does nothing: a reader holds no lease.
func (r *Reachability) Renewed(time.Duration) {}

// StoreAnswered records that op does not fail now.
func (r *Reachability) StoreAnswered(op string) {
	r.mu.Lock()
	delete(r.failing, op)
	r.mu.Unlock()
	r.notify()
}

// Probe pings the store every interval until ctx ends, recording the
// outcome as the operation "ping".
func (r *Reachability) Probe(ctx context.Context, ping func(context.Context) error, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		pctx, cancel := context.WithTimeout(ctx, every)
		err := ping(pctx)
		cancel()
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			r.StoreError("ping", err)
		default:
			r.StoreAnswered("ping")
		}
	}
}

func (r *Reachability) notify() {
	select {
	case r.changed <- struct{}{}:
	default:
	}
}

// Err is the last error of a failing operation (the lowest op name, for a
// stable choice), or nil when none fails.
func (r *Reachability) Err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	var op string
	for o := range r.failing {
		if op == "" || o < op {
			op = o
		}
	}
	if op == "" {
		return nil
	}
	return r.failing[op]
}
