package etcd

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// The head waiter's rule for its leader's lease.
//
// etcd deletes an expired lease's keys only when its lessor loop, which
// runs every 500 ms, finds it: a crashed leader's key outlives its lease by
// up to half a second. The waiter at the head of the queue closes that gap
// itself: it proves from the store's own answers that the leader's lease
// has expired, and then revokes it, which deletes the key and wakes the
// waiter's watch as a resignation would.
//
// The proof. LeaseTimeToLive reports a lease's remaining time in whole
// seconds (truncated: 0 means less than one second, either way). A
// renewal sets the remaining time back to the granted TTL G; for G ≥ 2 s
// every reading taken less than a second after a renewal is at least 1. So
// if two readings of 0 are less than a second apart on the store's clock,
// no renewal came between them, and the remaining time fell by exactly the
// time between them. A chain of 0 readings, each less than a second after
// the one before, that spans at least a second from its first reading
// (below 1 s remaining then) therefore ends on a lease whose remaining time
// is below zero: expired, with no renewal since. etcd never renews an
// expired lease (its lessor's Renew waits for the revocation and answers
// "lease not found"; server/lease/lessor.go in v3.7), so revoking it cannot
// take a term from a leader that still holds one: that leader's own
// deadline, earned by a renewal sent before the store received it, passed
// before the store's expiry. Local durations are stretched by the drift
// allowance both ways: a link counts only if it is under a second even on a
// clock that runs fast by the drift, and the span only if it is a second
// even on one that runs slow. A leader change on the store, which extends
// every lease, reads as a renewal (the chain starts again). A reading of -1
// or less is expired outright. With G = 1 s nothing can be proved this way,
// and the waiter leaves the lease to etcd.
//
// The cost. A head waiter asks once per renewal interval. When the leader
// publishes its renewal grid (value.grid), the waiter asks just after each
// renewal should have landed, G − 1 s later, when a missed renewal first
// shows as a 0; a failover then costs two more readings, a second apart,
// and the revocation. The other waiters, watching a waiter ahead of them,
// never ask.

// expireGuard is how long after the moment a renewal should have reached
// the store, one second short of its lease's end, the head waiter looks:
// the leader's timer and its request's way to the store, less than the
// waiter's own last round trip on a loaded host, and some clock offset
// between the two hosts' wall clocks.
const expireGuard = 10 * time.Millisecond

// expireAhead starts the head waiter's watch on the lease of the leader
// whose key is ahead, and returns the function that stops it and waits
// for it. It starts nothing for a key that is not a leader's (a waiter's
// key carries no start of term) or has no lease.
func (e *Elector) expireAhead(ctx context.Context, ahead *mvccpb.KeyValue) (stop func()) {
	v := decodeValue(ahead.Value)
	if v.Since.IsZero() || ahead.Lease == 0 {
		return func() {}
	}
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		e.expire(ctx, clientv3.LeaseID(ahead.Lease), v)
	}()
	return func() { cancel(); <-done }
}

// expire looks at lease until it proves it expired and revokes it, the
// lease is gone, or ctx ends.
func (e *Elector) expire(ctx context.Context, lease clientv3.LeaseID, leader value) {
	own := e.timing.RenewInterval
	drift := e.timing.Drift
	link := time.Duration(float64(time.Second) / (1 + drift)) // longest gap between two readings of a chain
	span := time.Duration(float64(time.Second) / (1 - drift)) // shortest span of a proof
	at, every, hinted := leader.grid()
	log := e.log.With("lease", int64(lease))

	var (
		chain    time.Time     // answer of the chain's first 0; zero: no chain
		prevSent time.Time     // send of the previous reading
		next     = e.clk.Now() // the first reading at once
	)
	for {
		if err := e.wait(ctx, next.Sub(e.clk.Now())); err != nil {
			return
		}
		sent, resp, err := e.timeToLive(ctx, lease)
		if refusedAtOnce(err) { // as in renewLoop
			sent, resp, err = e.timeToLive(ctx, lease)
		}
		answered := e.clk.Now()
		rtt := answered.Sub(sent)
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			return // revoked or expired and deleted: the watch will say
		case err != nil:
			e.fails.Failed("expire", err, "lease", int64(lease))
			chain = time.Time{}
			next = answered.Add(own)
			prevSent = sent
			continue
		}
		e.fails.Answered("expire")
		granted := time.Duration(resp.GrantedTTL) * time.Second
		if granted < 2*time.Second {
			log.Debug("lease too short to prove its expiry; left to etcd", "granted_s", resp.GrantedTTL)
			return
		}
		proved := resp.TTL < 0
		switch {
		case resp.TTL > 0:
			chain = time.Time{}
		case proved:
		case chain.IsZero() || answered.Sub(prevSent) >= link:
			chain = answered // remaining below 1 s at some instant before now
		case sent.Sub(chain) >= span:
			proved = true
		}
		prevSent = sent
		if proved {
			if e.revokeExpired(ctx, lease, log) {
				return
			}
			chain = time.Time{}
			next = e.clk.Now().Add(own)
			continue
		}
		if !chain.IsZero() {
			// The next link: the proof's end if it is near enough, else
			// half a link on.
			end := chain.Add(span)
			if end.Sub(sent)+rtt < link {
				next = end
			} else {
				next = sent.Add(link / 2)
			}
			continue
		}
		next = answered.Add(own)
		if hinted {
			// Just after one of the leader's renewals should have
			// landed, G − 1 s later (its request's way taken as long as
			// our round trip), and no sooner than 3/4 of an interval
			// after this reading.
			first := at.Add(granted - time.Second + expireGuard + rtt)
			wall := sent.Round(0).Add(own * 3 / 4)
			next = answered.Add(gridAfter(first, every, wall).Sub(answered.Round(0)))
		}
	}
}

// timeToLive asks for lease's remaining time and returns when it asked.
func (e *Elector) timeToLive(ctx context.Context, lease clientv3.LeaseID) (time.Time, *clientv3.LeaseTimeToLiveResponse, error) {
	sent := e.clk.Now()
	ctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	resp, err := e.client.TimeToLive(ctx, lease)
	return sent, resp, err
}

// revokeExpired revokes a lease proved expired. It reports whether the
// lease is gone. The request is not cut short when ctx ends: the waiter's
// watch sees the deletion as soon as the store applies it, and stopping
// then would leave it unknown whose revocation that was.
func (e *Elector) revokeExpired(ctx context.Context, lease clientv3.LeaseID, log *slog.Logger) bool {
	rctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), e.opTimeout())
	_, err := e.client.Revoke(rctx, lease)
	cancel()
	switch {
	case err == nil:
		e.expired.Add(1)
		log.Info("leader's lease expired on the store; revoked it")
		return true
	case errors.Is(err, rpctypes.ErrLeaseNotFound):
		return true // etcd's lessor came first
	default:
		e.fails.Failed("expire", err, "lease", int64(lease))
		return false
	}
}
