package etcd

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
)

// errAbandoned ends the deadline of a session whose campaign gave up.
var errAbandoned = errors.New("campaign abandoned")

// session is one etcd lease that this candidate renews itself, so that it
// knows when each acknowledged renewal was sent. It lives until its
// deadline ends (expiry, loss, resign, abandon or Close), then revokes the
// lease, which deletes the candidate's key in the same revision.
type session struct {
	e     *Elector
	lease clientv3.LeaseID
	dl    *elector.Deadline
	ctx   context.Context // cancelled when dl ends or the Elector closes
	stop  context.CancelFunc

	key string // candidate key, set once joined
	rev int64  // its create revision: the fencing token

	// leading is set once the session holds a term: its renewals are
	// then proved with a raft entry, a waiter's with a read (renewal.go).
	leading atomic.Bool
	// at is the member the first renewal goes through (pins); the renewal
	// loop owns it from then on, and ka, its renewals' stream (pin.go).
	at int
	ka keeper

	// origin is when the grant was sent: renewals are sent on the grid
	// origin + k·RenewInterval (see renewals), which the candidate
	// publishes once it leads, so that its successor knows when to look at
	// the lease (expire.go).
	origin time.Time

	relOnce sync.Once
	relErr  error
}

// newSession grants a lease and starts renewing it.
func (e *Elector) newSession(ctx context.Context) (*session, error) {
	e.mu.Lock()
	closed := e.closed
	e.mu.Unlock()
	if closed {
		return nil, elector.ErrClosed
	}
	gctx, cancel := context.WithTimeout(ctx, e.opTimeout())
	sent := e.clk.Now()
	resp, err := e.client.Grant(gctx, e.ttlSec)
	cancel()
	if err != nil {
		return nil, e.storeErr("grant", err)
	}
	timing := e.timing
	if granted := time.Duration(resp.TTL) * time.Second; granted < timing.TTL {
		// etcd never grants less than asked, but if it did, rely on less.
		timing.TTL = granted
	}
	s := &session{e: e, lease: resp.ID, dl: elector.NewDeadline(e.clk, timing, sent).ReportTo(e.ins), origin: sent}
	s.ctx, s.stop = context.WithCancel(e.ctx)
	s.dl.OnEnd(s.stop)
	s.ka = keeper{parent: s.ctx}

	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		s.dl.End(elector.ErrClosed)
		return nil, errors.Join(elector.ErrClosed, s.release(context.Background()))
	}
	e.sessions[s] = struct{}{}
	e.wg.Add(1)
	e.mu.Unlock()
	s.at = e.firstPin()
	e.pins.warm(s.at) // before the first renewal, an interval from now
	go s.renewLoop()
	e.log.Debug("lease granted", "lease", int64(s.lease), "ttl_s", resp.TTL, "valid_until", s.dl.ValidUntil())
	return s, nil
}

// renewLoop renews the lease on the grid origin + k·RenewInterval until
// the deadline ends; then it releases the lease. Each renewal goes through
// one member and is proved there (renewal.go) before it earns its deadline
// from its own send time. Renewals stay with a member while it answers; a
// renewal that fails is retried after a short backoff (a quarter
// interval, at most 250 ms) through the next member, so a member that
// cannot reach the quorum costs one attempt, not the term. A member that
// refused at once for want of a raft leader, and a renewal whose proof saw
// the raft term change (or another member answer), are retried at once:
// through the next member, and through the same one (whose last answer now
// carries the new term).
func (s *session) renewLoop() {
	e := s.e
	defer e.wg.Done()
	defer func() {
		e.mu.Lock()
		delete(e.sessions, s)
		e.mu.Unlock()
	}()
	defer s.ka.close()
	defer func() {
		if errors.Is(s.dl.Err(), elector.ErrResigned) {
			// The term's resign function releases: a switchover must
			// delete the key in its own transaction, not by a revoke
			// that would hand the term to the next in line.
			return
		}
		ctx, cancel := context.WithTimeout(context.Background(), e.opTimeout())
		defer cancel()
		_ = s.release(ctx) // logged and counted inside
	}()

	every := e.timing.RenewInterval
	budget := max(every, minRenewAttempt)
	next := s.origin.Add(every)
	at := s.at
	for {
		if err := e.wait(s.ctx, next.Sub(e.clk.Now())); err != nil {
			return
		}
		sent, err := s.renewAt(at, budget)
		switch {
		case refusedAtOnce(err):
			e.log.Debug("a member without a raft leader refused the renewal; asking the next", "lease", int64(s.lease))
			at++
			sent, err = s.renewAt(at, budget)
		case errors.Is(err, errUnproved):
			e.log.Debug("the renewal was answered but not proved (the member's raft term changed, or another member answered); it counts for nothing, renewing again", "lease", int64(s.lease))
			sent, err = s.renewAt(at, budget)
		}
		switch {
		case err == nil:
			e.fails.Answered("renew")
			if until, ok := s.dl.Renewed(sent); ok {
				e.log.Debug("lease renewed", "lease", int64(s.lease), "valid_until", until, "took", e.clk.Now().Sub(sent))
			}
			next = gridAfter(s.origin, every, e.clk.Now())
		case errors.Is(err, rpctypes.ErrLeaseNotFound):
			e.ins.StoreError("renew", err)
			e.fails.Answered("renew") // it answered: the lease is gone
			if s.dl.End(elector.ErrLeaseLost) {
				e.log.Warn("lease gone on the store", "lease", int64(s.lease))
			}
			return
		case s.ctx.Err() != nil:
			return
		default:
			retry := min(every/4, 250*time.Millisecond)
			e.fails.Failed("renew", err, "lease", int64(s.lease), "retry_in", retry,
				"valid_for", s.dl.ValidUntil().Sub(e.clk.Now()).Round(time.Millisecond))
			at++
			next = e.clk.Now().Add(retry)
		}
	}
}

// minRenewAttempt is the least time a renewal and its proof get together
// (else one renewal interval): at a short interval (the fault tests renew
// every 100 ms) a loaded host's keepalive and raft entry can take longer
// than the interval, and every attempt would fail while the store is
// healthy. A longer attempt costs no safety: the renewal still counts from
// its send time, and not at all once the deadline has passed.
const minRenewAttempt = 250 * time.Millisecond

// renewAt renews through member at (modulo the members); see renew.
func (s *session) renewAt(at int, timeout time.Duration) (time.Time, error) {
	p, err := s.e.pins.at(at)
	if err != nil {
		return time.Time{}, err
	}
	return s.renew(p, timeout)
}

// gridAfter is the first instant origin + k·every (k ≥ 1) after now.
func gridAfter(origin time.Time, every time.Duration, now time.Time) time.Time {
	k := now.Sub(origin)/every + 1
	return origin.Add(k * every)
}

// release ends the session and revokes its lease once, deleting its key:
// waiters watching that key react at once. A lease that is already gone
// counts as released.
func (s *session) release(ctx context.Context) error {
	s.relOnce.Do(func() {
		s.dl.End(errAbandoned) // no-op if already ended for another reason
		_, err := s.e.client.Revoke(ctx, s.lease)
		switch {
		case err == nil, errors.Is(err, rpctypes.ErrLeaseNotFound):
			s.e.log.Debug("lease revoked", "lease", int64(s.lease))
		default:
			s.e.ins.StoreError("revoke", err)
			s.e.log.Warn("lease revoke failed; it will expire on the store", "lease", int64(s.lease), "err", err)
			s.relErr = &elector.StoreError{Op: "revoke", Err: err}
		}
	})
	return s.relErr
}
