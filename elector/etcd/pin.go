package etcd

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sync"
	"sync/atomic"

	"go.etcd.io/etcd/api/v3/etcdserverpb"
	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/connectivity"

	"github.com/electd/electd/elector"
)

// pins are an Elector's own connections to each member of its client's
// endpoints, one per member, for the requests whose answer must be the
// word of one raft leader (renewal.go): the client's balanced connection
// sends each request to the next member, so two requests in a row reach
// two members, and a member's answer says nothing of which raft leader
// another member follows.
//
// Each connection is dialled on first use with the client's own settings
// (Client.Dial: TLS, the auth token, the dial options) and closed at
// Close. gRPC connects lazily, so a member never asked costs nothing.
type pins struct {
	cli *clientv3.Client
	eps []string

	mu     sync.Mutex
	closed bool
	ps     []*pin // by endpoint; nil until first used
}

// pin is one member's connection, and the word of its last answer.
type pin struct {
	ep    string
	conn  *grpc.ClientConn
	lease etcdserverpb.LeaseClient
	kv    etcdserverpb.KVClient

	// last is the mark of the last answer to any of this Elector's
	// requests on this connection (nil before the first).
	last atomic.Pointer[mark]
}

// mark is what an answer's header says of who answered: the member's id,
// and the raft term etcd fills in, which is the term of the last raft
// entry that member applied (EtcdServer.Term), not the term of whichever
// raft leader served the request: renewal.go says why that is enough, and
// when. The member's id matters where one endpoint may reach several
// members (a TCP load balancer in front of them: a new connection may land
// on another member).
type mark struct{ member, term uint64 }

// markOf reads h.
func markOf(h *etcdserverpb.ResponseHeader) mark {
	return mark{member: h.GetMemberId(), term: h.GetRaftTerm()}
}

func newPins(cli *clientv3.Client) *pins {
	eps := cli.Endpoints()
	return &pins{cli: cli, eps: eps, ps: make([]*pin, len(eps))}
}

// n is the number of members.
func (ps *pins) n() int { return len(ps.eps) }

// at returns member i's connection (i modulo n), dialling it on first use.
// A connection whose last attempt failed is told to try again now rather
// than wait out gRPC's backoff (up to 2 minutes): a member back up answers
// the next request.
func (ps *pins) at(i int) (*pin, error) {
	if len(ps.eps) == 0 {
		return nil, errors.New("the etcd client has no endpoints")
	}
	i %= len(ps.eps)
	ps.mu.Lock()
	defer ps.mu.Unlock()
	if ps.closed {
		return nil, elector.ErrClosed
	}
	if p := ps.ps[i]; p != nil {
		retryNow(p.conn)
		return p, nil
	}
	conn, err := ps.cli.Dial(ps.eps[i])
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", ps.eps[i], err)
	}
	p := &pin{ep: ps.eps[i], conn: conn, lease: etcdserverpb.NewLeaseClient(conn), kv: etcdserverpb.NewKVClient(conn)}
	ps.ps[i] = p
	return p, nil
}

// warm dials member i's connection and has gRPC connect it now, in the
// background, so that the first renewal through it (an interval after a
// grant) does not wait for a TCP, TLS and HTTP/2 handshake on top of its
// requests: a crowd of candidates granted together would all pay it at
// once. Only that member's: the others are dialled if renewals move there.
// A member that cannot be dialled is left for at to report.
func (ps *pins) warm(i int) {
	if p, err := ps.at(i); err == nil {
		p.conn.Connect()
	}
}

// retryNow tells a connection whose last attempt failed to try again now
// rather than wait out gRPC's backoff, which grows to 2 minutes: a member
// back up is reached at the next request. (members.probe calls it too.)
func retryNow(c *grpc.ClientConn) {
	if c.GetState() == connectivity.TransientFailure {
		c.ResetConnectBackoff()
	}
}

// close closes every connection; at fails after it.
func (ps *pins) close() error {
	ps.mu.Lock()
	defer ps.mu.Unlock()
	ps.closed = true
	var errs []error
	for i, p := range ps.ps {
		if p != nil {
			if err := p.conn.Close(); err != nil {
				errs = append(errs, fmt.Errorf("close connection to %s: %w", p.ep, err))
			}
			ps.ps[i] = nil
		}
	}
	return errors.Join(errs...)
}

// saw notes an answer's mark and returns it.
func (p *pin) saw(h *etcdserverpb.ResponseHeader) mark {
	m := markOf(h)
	p.last.Store(&m)
	return m
}

// keeper is a LeaseKeepAlive stream kept open from one renewal to the next
// by the one goroutine that renews a lease (a session's renewLoop), on the
// connection of the member the renewals go through.
//
// Why one stream, not one per renewal: clientv3's stream interceptor logs
// in again before it opens any stream when the client has a user name
// (Client.getToken, for watches that outlive their token), and a login is
// a bcrypt check and a raft write on the server: with auth on, a stream
// per renewal cost every renewal a login (130–400 ms on a busy host, and
// terms lost to it). A unary request carries the token the client holds.
//
// The stream carries one renewal at a time, so the next answer on it is
// the answer to the renewal just sent. Any failure closes it (a renewal
// that timed out may still be answered later), and so does a renewal
// through another member; the next renewal opens another.
type keeper struct {
	parent context.Context // the stream's life: the session's

	p      *pin                                    // whose connection the stream is on
	stream etcdserverpb.Lease_LeaseKeepAliveClient // nil: none open
	cancel context.CancelFunc                      // ends the stream
}

// keepAlive sends one renewal of lease through p and waits for its answer,
// whose mark it returns; "lease not found" is rpctypes.ErrLeaseNotFound, as
// from clientv3. ctx bounds the renewal, the stream's opening included.
// Unlike clientv3's KeepAliveOnce it does not retry: a member that is down
// fails the attempt at once, and the caller asks the next.
func (k *keeper) keepAlive(ctx context.Context, p *pin, lease clientv3.LeaseID) (mark, error) {
	kept := k.p == p && k.stream != nil
	m, err := k.attempt(ctx, p, lease)
	if kept && err != nil && ctx.Err() == nil && !errors.Is(err, rpctypes.ErrLeaseNotFound) {
		// The kept stream may have ended since the last renewal (its
		// connection broke and came back, the member restarted, or it
		// lost its raft leader for a while and ended its streams with
		// "no leader" though it has one again): once more on a new
		// stream, within the same bound. Only the answer that comes back
		// counts, and its send is later than the caller's send time, so
		// that time stays conservative.
		return k.attempt(ctx, p, lease)
	}
	return m, err
}

// attempt is one renewal on the kept stream (opened if need be).
func (k *keeper) attempt(ctx context.Context, p *pin, lease clientv3.LeaseID) (mark, error) {
	if k.p != p {
		k.close()
		k.p = p
	}
	var sctx context.Context // the new stream's, if one is opened
	if k.stream == nil {
		sctx, k.cancel = context.WithCancel(k.parent)
	}
	stop := context.AfterFunc(ctx, k.cancel) // ends the stream if ctx ends first
	m, err := k.roundTrip(ctx, sctx, lease)
	if !stop() || err != nil {
		k.close()
	}
	return m, err
}

// roundTrip opens the stream on sctx if there is none, sends the renewal
// and reads its answer.
func (k *keeper) roundTrip(ctx, sctx context.Context, lease clientv3.LeaseID) (mark, error) {
	if k.stream == nil {
		stream, err := k.p.lease.LeaseKeepAlive(sctx)
		if err != nil {
			return mark{}, toErr(ctx, err)
		}
		k.stream = stream
	}
	err := k.stream.Send(&etcdserverpb.LeaseKeepAliveRequest{ID: int64(lease)})
	if err != nil && !errors.Is(err, io.EOF) {
		return mark{}, toErr(ctx, err)
	}
	// After io.EOF from Send (the member ended the stream: with "no
	// leader", say), Recv returns the stream's real status.
	resp, err := k.stream.Recv()
	if err != nil {
		return mark{}, toErr(ctx, err)
	}
	m := k.p.saw(resp.Header)
	if resp.ID != int64(lease) {
		return m, fmt.Errorf("etcd answered the renewal of lease %x for lease %x", int64(lease), resp.ID)
	}
	if resp.TTL <= 0 {
		return m, rpctypes.ErrLeaseNotFound
	}
	return m, nil
}

// close ends the stream, if any.
func (k *keeper) close() {
	if k.cancel != nil {
		k.cancel()
	}
	k.p, k.stream, k.cancel = nil, nil, nil
}

// timeToLive asks for lease's remaining time.
func (p *pin) timeToLive(ctx context.Context, lease clientv3.LeaseID) (*etcdserverpb.LeaseTimeToLiveResponse, error) {
	resp, err := p.lease.LeaseTimeToLive(ctx, &etcdserverpb.LeaseTimeToLiveRequest{ID: int64(lease)})
	if err != nil {
		return nil, toErr(ctx, err)
	}
	p.saw(resp.Header)
	return resp, nil
}

// get reads key: linearizably (the raft leader confirms it still leads, a
// heartbeat round to a quorum in its term, and the member waits until it
// has applied that far) or, serializable, from the member's own copy.
func (p *pin) get(ctx context.Context, key string, linearizable bool) (*etcdserverpb.RangeResponse, error) {
	resp, err := p.kv.Range(ctx, &etcdserverpb.RangeRequest{Key: []byte(key), Serializable: !linearizable})
	if err != nil {
		return nil, toErr(ctx, err)
	}
	p.saw(resp.Header)
	return resp, nil
}

// toErr turns a gRPC error into clientv3's typed errors (rpctypes.Err…),
// and reports the context's own end as such.
func toErr(ctx context.Context, err error) error {
	return clientv3.ContextError(ctx, rpctypes.Error(err))
}
