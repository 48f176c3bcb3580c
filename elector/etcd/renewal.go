package etcd

import (
	"context"
	"errors"
	"time"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/mvccpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
)

// When an acknowledged renewal counts.
//
// etcd keeps a lease's expiry in the raft leader's lessor alone; renewals
// are not replicated. A raft leader that was replaced without knowing it
// (cut off from its peers, or its peers' messages delayed) goes on
// acknowledging renewals until CheckQuorum makes it step down, up to two
// election timeouts after it last heard from a quorum: etcd's
// ensureLeadership is skipped while its own ticks run, and a renewal a
// follower forwards over peer HTTP skips it entirely. Its successor can
// lead at once (after a MoveLeader, at once; else from about one election
// timeout) and extends every lease by one election timeout only
// (lessor.Promote: its own now + TTL + election timeout). So a renewal the
// old raft leader acknowledged after that extension's start is covered by
// nothing, and a deadline earned from it can outlast the lease on the
// store: two valid terms at once (reproduced: TestClusterTransferThenCut).
//
// So an acknowledged renewal counts (earns its deadline from its send
// time) only once it is proved to have been served by a raft leader that
// still held its quorum after serving it. Every request of the proof goes
// through the same member X, on the Elector's own connection to it (pins):
//
//  1. before: the raft term in the header of an answer from X received
//     before the renewal was sent (X's last answer to any pinned request;
//     a serializable read of X's own copy if there is none).
//  2. the renewal, through X.
//  3. after: a raft entry through X, proposed once the renewal's answer
//     came back (a transaction that may write, whose compare never holds:
//     it writes nothing, but it is a raft entry, and X answers once it has
//     applied it). The renewal counts if after equals before, and if the
//     three answers' headers name the same member: one endpoint may reach
//     several members (a TCP load balancer in front of them), and a
//     connection that broke may come back on another one.
//
// Why that proves it. etcd fills a header's raft term with the term of the
// last raft entry the answering member applied (EtcdServer.Term), which
// only grows, and which is never above the member's current raft term.
//   - X sends (or serves) the renewal to the raft leader it knows, in its
//     current term, at least before (X had applied an entry of term before
//     by then). So the lessor that served the renewal is that of the
//     leader of some term t ≥ before, at some instant r.
//   - The entry is committed in some term t2 by that term's raft leader,
//     with a quorum, after the renewal was served, and X applies it before
//     it answers: so after ≥ t2 (the entry's own term). And t2 ≥ t, since
//     the quorum that elected t's leader before r and the entry's quorum
//     after r share a member, whose term never goes down.
//   - after = before therefore gives t2 = t: a quorum still followed the
//     leader of t after r. Any raft leader of a later term was elected
//     after r, since a member that acknowledged the leader of t after r
//     had not voted in a later term by then, and it extends the lease from
//     its own start, after r, by TTL and more. The renewal's deadline,
//     counted from its send time before r, ends before that.
//
// A raft leader change costs the renewal under way (its terms differ; the
// next renewal, at once, counts), a cut-off raft leader costs one attempt
// (the entry finds no quorum and times out; the next attempt goes to the
// next member). In steady state the proof costs one raft entry per renewal
// interval (a WAL write on a quorum, no revision, no watch event): two
// requests where there was one.
//
// Why an entry and not a linearizable read, which would cost no write: a
// read is answered once X has applied up to the read index, but a member
// that gets there by installing a raft snapshot (a member that fell more
// than the leader's snapshot catch-up entries behind, 5000 by default, as
// a raft leader that was stalled and cut off does on a busy cluster)
// reports the term of the last entry it applied before the snapshot until
// it applies another: a read could come back with the old term after a
// stale lessor served the renewal. The head waiter's proof fell to this
// (TestStaleTermAfterSnapshotSparesLiveLease). An entry is applied by
// itself, after any snapshot. While etcd's space quota is exceeded
// (NOSPACE) it takes no entry, and the proof falls back to the read, with
// that gap.
//
// Waiters prove their renewals with the read. A raft entry per renewal
// per waiter costs a crowd too much: 50 candidates at --ttl 5s on the test
// cluster, under -race on 2 cores, overloaded it (campaigns and renewals
// timing out for seconds, sessions lapsing) in 2 of 3 runs, and never with
// reads. A waiter's deadline matters only once it leads: its term begins
// with the deadline its last renewals earned, read-proved, and its own
// renewals are proved by entries from then on (leading). So the snapshot
// gap remains for the first window of a term only. A member that restarted reports 0 until it applies an entry:
// before = 0 never counts.

// errUnproved is an acknowledged renewal (or a reading of the leader's
// lease) whose proof failed: its member reported another raft term after
// it (the raft leader may have changed meanwhile), or another member
// answered. The answer proves nothing.
var errUnproved = errors.New("the member's raft term changed, or another member answered, while the request was answered")

// markBefore returns the mark of p's last answer, received before now,
// asking p for a serializable read of key if it never answered.
func (p *pin) markBefore(ctx context.Context, key string) (mark, error) {
	if m := p.last.Load(); m != nil {
		return *m, nil
	}
	g, err := p.get(ctx, key, false)
	if err != nil {
		return mark{}, err
	}
	return markOf(g.Header), nil
}

// same reports errUnproved unless the answer marked got comes from the
// member that gave before, in the same raft term, and that term is known.
func (before mark) same(got mark) error {
	if before.term == 0 || got != before {
		return errUnproved
	}
	return nil
}

// confirm reads key linearizably through p and returns the read, or
// errUnproved unless its mark is before (step 3 above): the answers p gave
// between before's answer and now were the word of one raft leader, which
// still leads.
func (p *pin) confirm(ctx context.Context, key string, before mark) (*etcdserverpb.RangeResponse, error) {
	g, err := p.get(ctx, key, true)
	if err != nil {
		return nil, err
	}
	return g, before.same(markOf(g.Header))
}

// confirmByEntry is confirm made of a raft entry instead of a read: a
// transaction through p whose compare never holds (a version below 0), so
// that its put never runs, and which reads key instead. A transaction that
// may write is proposed through raft even when it writes nothing, and p
// answers once it has applied that entry itself, so the term in its header
// is at least the entry's (the read's term is not: a member that caught up
// by installing a raft snapshot reports the term of the last entry it
// applied before the snapshot until it applies another). It costs a raft
// entry (a WAL write on a quorum), and etcd refuses it while its space
// quota is exceeded (NOSPACE).
func (p *pin) confirmByEntry(ctx context.Context, key string, before mark) ([]*mvccpb.KeyValue, error) {
	k := []byte(key)
	resp, err := p.kv.Txn(ctx, &etcdserverpb.TxnRequest{
		Compare: []*etcdserverpb.Compare{{
			Key: k, Target: etcdserverpb.Compare_VERSION, Result: etcdserverpb.Compare_LESS,
			TargetUnion: &etcdserverpb.Compare_Version{Version: 0},
		}},
		Success: []*etcdserverpb.RequestOp{{Request: &etcdserverpb.RequestOp_RequestPut{RequestPut: &etcdserverpb.PutRequest{Key: k}}}},
		Failure: []*etcdserverpb.RequestOp{{Request: &etcdserverpb.RequestOp_RequestRange{RequestRange: &etcdserverpb.RangeRequest{Key: k}}}},
	})
	if err != nil {
		return nil, toErr(ctx, err)
	}
	got := p.saw(resp.Header)
	if resp.Succeeded || len(resp.Responses) != 1 || resp.Responses[0].GetResponseRange() == nil {
		return nil, errors.New("etcd answered the confirming transaction with another branch than the one it must take")
	}
	return resp.Responses[0].GetResponseRange().Kvs, before.same(got)
}

// renew sends one renewal through member p and proves it, within timeout;
// it returns when the renewal was sent. An error means the renewal earns
// nothing: it failed, or was answered but not proved (errUnproved, or the
// proof's read failed). After an error the renewals' stream is not kept:
// it may be on another member than p's connection now reaches (a member
// that drains its streams after a GOAWAY answers on them while new
// requests go elsewhere), and the next renewal opens a new one.
func (s *session) renew(p *pin, timeout time.Duration) (_ time.Time, err error) {
	ctx, cancel := context.WithTimeout(s.ctx, timeout)
	defer cancel()
	defer func() {
		if err != nil {
			s.ka.close()
		}
	}()
	key := s.e.pfx // any key: only the read's header matters
	before, err := p.markBefore(ctx, key)
	if err != nil {
		return time.Time{}, err
	}
	sent := s.e.clk.Now()
	got, err := s.ka.keepAlive(ctx, p, s.lease)
	if err != nil {
		return sent, err
	}
	if err := before.same(got); err != nil {
		return sent, err
	}
	if !s.leading.Load() {
		_, err = p.confirm(ctx, key, before) // a waiter's: see above
		return sent, err
	}
	_, err = p.confirmByEntry(ctx, key, before)
	if errors.Is(err, rpctypes.ErrNoSpace) {
		// etcd takes no entry while its space quota is exceeded; the read
		// still proves the renewal, but for a member that has just caught
		// up by a raft snapshot (see above).
		s.e.log.Debug("etcd is out of space: the renewal is proved by a read", "lease", int64(s.lease))
		_, err = p.confirm(ctx, key, before)
	}
	return sent, err
}
