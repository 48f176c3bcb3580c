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
// before the store's expiry (a renewal that passed etcd's check just
// before the expiry is acknowledged after it, after the leader's deadline,
// and Deadline.Renewed refuses it). Local durations are stretched by the
// drift allowance both ways: a link counts only if it is under a second
// even on a clock that runs slow by the drift (and counts any time the
// host was suspended: the monotonic clock stood still, the store's did
// not), and the span only if it is a second even on one that runs fast. A
// leader change on the store, which extends every lease, reads as a
// renewal (the chain starts again). A reading of -1 or less is expired
// outright. With G = 1 s nothing can be proved this way, and the waiter
// leaves the lease to etcd.
//
// Only the current raft leader's readings count: a raft leader replaced
// without knowing it answers from a lessor that no longer sees renewals.
// The raft term in an answer's header does not tell whose lessor answered
// (it is the term of the last entry the answering member applied), so the
// readings are proved as renewals are (renewal.go): every reading of a
// chain goes through one member, on the Elector's own connection to it,
// and carries that member's term from before it was sent; a chain holds
// readings of one member and one term, and before revoking, the waiter
// reads the leader's key through that member with a raft entry and goes on
// only if the entry's term is still the chain's (confirm). Then every reading
// came from the lessor of that term's raft leader, which still led after
// the last one.
//
// The cost. A head waiter asks once per renewal interval. When the leader
// publishes its renewal grid (value.grid), the waiter asks just after each
// renewal should have landed, G − 1 s later, when a missed renewal first
// shows as a 0; a failover then costs two more readings, a second apart,
// a raft entry (confirm) and the revocation. The other waiters, watching a
// waiter ahead of them, never ask until that waiter leads.

// expireGuard is how long after the moment a renewal should have reached
// the store, one second short of its lease's end, the head waiter looks:
// the leader's timer and its request's way to the store, less than the
// waiter's own last round trip on a loaded host, and some clock offset
// between the two hosts' wall clocks.
const expireGuard = 10 * time.Millisecond

// aheadWatch is the head waiter's watch on the lease of the key ahead: it
// starts once that key is a leader's (a waiter's key carries no start of
// term; a waiter ahead that becomes leader writes one, and the watch on
// its key offers it again), and stop ends it and waits for it.
type aheadWatch struct {
	e       *Elector
	ctx     context.Context
	cancel  context.CancelFunc
	done    chan struct{}
	started bool
}

func (e *Elector) watchAhead(ctx context.Context) *aheadWatch {
	w := &aheadWatch{e: e, done: make(chan struct{})}
	w.ctx, w.cancel = context.WithCancel(ctx)
	return w
}

// offer starts the watch if kv, the key ahead, is a leader's; once.
func (w *aheadWatch) offer(kv *mvccpb.KeyValue) {
	v := decodeValue(kv.Value)
	if w.started || v.Since.IsZero() || kv.Lease == 0 {
		return
	}
	w.started = true
	go func() {
		defer close(w.done)
		w.e.expire(w.ctx, kv, v)
	}()
}

func (w *aheadWatch) stop() {
	w.cancel()
	if w.started {
		<-w.done
	}
}

// reading is one LeaseTimeToLive answer, with the waiter's clock around it.
type reading struct {
	sent, answered time.Time
	suspended      time.Duration // the clock's suspended time when it was sent
	ttl, granted   int64         // seconds
	at             int           // the member it went through (pins)
	before         mark          // that member's mark before it was sent (renewal.go)
}

// expire looks at the lease of the leader's key kv until it proves it
// expired and revokes it, the lease or the key is gone, or ctx ends.
func (e *Elector) expire(ctx context.Context, kv *mvccpb.KeyValue, leader value) {
	lease := clientv3.LeaseID(kv.Lease)
	own := e.timing.RenewInterval
	drift := e.timing.Drift
	link := time.Duration(float64(time.Second) * (1 - drift)) // longest gap between two readings of a chain
	span := time.Duration(float64(time.Second) / (1 - drift)) // shortest span of a proof
	at, every, hinted := leader.grid()
	log := e.log.With("lease", int64(lease))

	var (
		chain *reading       // the chain's first 0; nil: no chain
		prev  reading        // the reading before
		next  = e.clk.Now()  // the first reading at once
		via   = e.firstPin() // the member the readings go through
	)
	for {
		if err := e.wait(ctx, next.Sub(e.clk.Now())); err != nil {
			return
		}
		r, err := e.timeToLive(ctx, via, lease)
		if refusedAtOnce(err) { // as in renewLoop
			via++
			r, err = e.timeToLive(ctx, via, lease)
		}
		switch {
		case ctx.Err() != nil:
			return
		case errors.Is(err, errUnproved): // the member's term moved: a raft leader change
			chain, prev = nil, r
			next = r.answered
			continue
		case err != nil:
			e.fails.Failed("expire", err, "lease", int64(lease))
			via++
			chain, prev = nil, r
			next = r.answered.Add(own)
			continue
		}
		e.fails.Answered("expire")
		if r.granted == 0 {
			return // gone (etcd answers TTL -1 and no granted TTL): the watch will say
		}
		if r.granted < 2 {
			log.Debug("lease too short to prove its expiry; left to etcd", "granted_s", r.granted)
			return
		}
		// A gap counts the time the waiter's host was suspended: its clock
		// stood still, the store's did not.
		gap := r.answered.Sub(prev.sent) + e.clk.Suspended() - prev.suspended
		var proof *reading
		switch {
		case r.ttl > 0:
			chain = nil
		case r.ttl < 0:
			proof = &r
		case chain == nil || gap >= link || r.at != chain.at || r.before != chain.before:
			chain = &r // remaining below 1 s at some instant before now
		case r.sent.Sub(chain.answered) >= span:
			proof = chain
		}
		prev = r
		if proof != nil {
			switch e.confirm(ctx, kv, proof) {
			case gone:
				return
			case confirmed:
				if e.revokeExpired(lease, log) {
					return
				}
			}
			chain = nil
			next = e.clk.Now().Add(own)
			continue
		}
		if chain != nil {
			// The next link: the proof's end if it is near enough, else
			// half a link on.
			end := chain.answered.Add(span)
			if rtt := r.answered.Sub(r.sent); end.Sub(r.sent)+rtt < link {
				next = end
			} else {
				next = r.sent.Add(link / 2)
			}
			continue
		}
		next = r.answered.Add(own)
		if hinted {
			// Just after one of the leader's renewals should have
			// landed, G − 1 s later (its request's way taken as long as
			// our round trip), and no sooner than 3/4 of an interval
			// after this reading.
			granted := time.Duration(r.granted) * time.Second
			first := at.Add(granted - time.Second + expireGuard + r.answered.Sub(r.sent))
			wall := r.sent.Round(0).Add(own * 3 / 4)
			next = r.answered.Add(gridAfter(first, every, wall).Sub(r.answered.Round(0)))
		}
	}
}

type confirmation int

const (
	unconfirmed confirmation = iota // ask again
	confirmed                       // the readings' raft leader is the current one
	gone                            // the leader's key is gone or replaced
)

// confirm checks, through the member a proof's readings went through,
// that the raft term of the readings is still the current one, and reads
// the leader's key: with a raft entry (confirmByEntry), not a linearizable
// read, since a member that caught up by a raft snapshot reports a stale
// term in a read's answer (reproduced: TestStaleTermAfterSnapshotSparesLiveLease).
// Then the readings were the word of the current raft leader's lessor. A raft leader that was replaced
// without knowing it answers LeaseTimeToLive from its own lessor, which no
// longer sees the leader's renewals: its readings prove nothing.
func (e *Elector) confirm(ctx context.Context, kv *mvccpb.KeyValue, proof *reading) confirmation {
	gctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	p, err := e.pins.at(proof.at)
	var kvs []*mvccpb.KeyValue
	if err == nil {
		kvs, err = p.confirmByEntry(gctx, string(kv.Key), proof.before)
	}
	switch {
	case errors.Is(err, errUnproved):
		e.log.Debug("the lease readings came from another raft term or member; starting over",
			"lease", kv.Lease, "readings_term", proof.before.term)
		return unconfirmed
	case err != nil:
		if ctx.Err() == nil {
			e.fails.Failed("expire", err, "lease", kv.Lease)
		}
		return unconfirmed
	case len(kvs) == 0 || kvs[0].CreateRevision != kv.CreateRevision || kvs[0].Lease != kv.Lease:
		return gone
	}
	return confirmed
}

// timeToLive asks for lease's remaining time through member at, noting
// that member's raft term from before the request (renewal.go).
func (e *Elector) timeToLive(ctx context.Context, at int, lease clientv3.LeaseID) (reading, error) {
	r := reading{at: at, sent: e.clk.Now(), suspended: e.clk.Suspended()}
	tctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	defer cancel()
	p, err := e.pins.at(at)
	if err == nil {
		r.before, err = p.markBefore(tctx, e.pfx)
	}
	if err != nil {
		r.answered = e.clk.Now()
		return r, err
	}
	r.sent, r.suspended = e.clk.Now(), e.clk.Suspended()
	resp, err := p.timeToLive(tctx, lease)
	r.answered = e.clk.Now()
	if err == nil {
		err = r.before.same(markOf(resp.Header))
	}
	if err != nil {
		return r, err
	}
	r.ttl, r.granted = resp.TTL, resp.GrantedTTL
	return r, nil
}

// revokeExpired revokes a lease proved expired. It reports whether the
// lease is gone. The request is not cut short when ctx ends: the waiter's
// watch sees the deletion as soon as the store applies it, and stopping
// then would leave it unknown whose revocation that was.
func (e *Elector) revokeExpired(lease clientv3.LeaseID, log *slog.Logger) bool {
	rctx, cancel := context.WithTimeout(e.ctx, e.opTimeout()) // until Close
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
