package etcd

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"sync"
	"time"

	pb "go.etcd.io/etcd/api/v3/etcdserverpb"
	clientv3 "go.etcd.io/etcd/client/v3"
	"google.golang.org/grpc"
	"google.golang.org/grpc/stats"
	"google.golang.org/grpc/status"

	"github.com/electd/electd/elector/backend"
)

// Which members electd's requests go to.
//
// clientv3 (v3.7) dials one gRPC connection over every host of the store
// URL with gRPC's round_robin policy: a subconnection per member, each kept
// connected (one that drops is redialled, with backoff), and each request
// — every unary call, every stream when it opens — goes to the next member
// with a ready subconnection. There is no health check: "the member in
// use" is every member electd can connect to, whether or not it has a
// leader. A member cut off from its peers still accepts connections, so
// with three members a third of the unary requests go to it and wait until
// their timeout (measured on v3.7.3: Get, Put, LeaseGrant and
// LeaseKeepAlive). A stream, such as the one that carries electd's
// watches, stays on the member it opened on until it breaks.
//
// Members reports, per host: the member's id and name, whether it answers,
// the raft leader it follows (Maintenance.Status: served by the member
// alone, without a quorum, so a partitioned member answers with leader 0),
// and whether the client's own connection holds a ready subconnection to it
// (InUse) and how many streams it has open there. gRPC does not expose the
// state of a subconnection; a stats handler on the client's connections
// (memberUse) follows their transports and streams instead.
//
// Cost: each check is one Status per member, in parallel, on a connection
// per member kept for the purpose (dialled at the first check, so a check
// opens no TCP or TLS connection of its own), and now and then one
// MemberList for the names. A report younger than memberCheckEvery is served
// again, and concurrent callers share the check under way, so however
// often /healthz is polled, each member gets at most one Status a second
// from each copy of electd, and none while nobody asks.

const (
	// memberCheckTimeout bounds a member's Status (and the MemberList that
	// names the members): a member that does not answer within it is
	// reported as not answering, and a check takes at most about this long.
	// Status is served by the member alone; on a LAN it takes about a
	// millisecond, so only a member that is down, unreachable or stalled
	// exceeds it. It leaves most of /healthz's 3 s, and a load balancer's
	// 1 s probe timeout, to spare.
	memberCheckTimeout = 500 * time.Millisecond
	// memberCheckEvery is the least time between the end of a check and the
	// start of the next: a report younger than it is served again.
	memberCheckEvery = time.Second
	// memberNamesEvery is how often names are asked for (one serializable
	// MemberList) while an id seen has no name yet; members do not rename
	// themselves, so names are asked for only when an id is new.
	memberNamesEvery = 10 * time.Second
)

// Members reports each host of the store URL, in order, as this
// connection sees it now (see backend.Member): at most one check per
// memberCheckEvery, shared by concurrent callers; ctx bounds the wait for
// one.
func (c *conn) Members(ctx context.Context) ([]backend.Member, error) {
	return c.members.report(ctx)
}

var _ interface {
	Members(context.Context) ([]backend.Member, error)
} = (*conn)(nil)

// members checks the members of one client's store URL and caches the
// report.
type members struct {
	endpoints []string
	use       *memberUse

	// Set by start; ctx ends at close.
	cli    *clientv3.Client
	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup // the check under way

	mu      sync.Mutex
	closed  bool
	last    []backend.Member // nil before the first check
	lastAt  time.Time        // when it ended
	running chan struct{}    // closed when the check under way ends; nil if none

	// Owned by the check under way (there is at most one), and by close
	// once none can start.
	probes  []*grpc.ClientConn // per endpoint; nil until its first check
	ids     []uint64           // per endpoint: the member id last seen there
	names   map[uint64]string  // member id → name
	namesAt time.Time          // the last MemberList
}

// newMembers follows the members of endpoints; give dialOption to the
// client's connections, then start with the client.
func newMembers(endpoints []string) *members {
	return &members{
		endpoints: endpoints,
		use:       &memberUse{conns: map[connKey]*connUse{}, streams: map[string]int{}, seen: map[string][]string{}},
		probes:    make([]*grpc.ClientConn, len(endpoints)),
		ids:       make([]uint64, len(endpoints)),
		names:     map[uint64]string{},
	}
}

// dialOption installs the stats handler that tells which members the
// connection uses.
func (m *members) dialOption() grpc.DialOption { return grpc.WithStatsHandler(m.use) }

// start makes m check cli's members and returns m.
func (m *members) start(cli *clientv3.Client) *members {
	m.cli = cli
	m.ctx, m.cancel = context.WithCancel(context.Background())
	return m
}

// close ends the check under way, if any, and closes the check
// connections. The client is the caller's to close, after.
func (m *members) close() {
	m.mu.Lock()
	m.closed = true
	m.mu.Unlock()
	if m.cancel == nil {
		return
	}
	m.cancel()
	m.wg.Wait()
	for _, p := range m.probes {
		if p != nil {
			_ = p.Close()
		}
	}
}

var errMembersClosed = errors.New("etcd connection closed")

func (m *members) report(ctx context.Context) ([]backend.Member, error) {
	m.mu.Lock()
	if m.closed || m.cli == nil {
		m.mu.Unlock()
		return nil, errMembersClosed
	}
	if m.last != nil && time.Since(m.lastAt) < memberCheckEvery {
		defer m.mu.Unlock()
		return slices.Clone(m.last), nil
	}
	done := m.running
	if done == nil {
		done = make(chan struct{})
		m.running = done
		m.wg.Add(1)
		go m.check(done)
	}
	m.mu.Unlock()
	select {
	case <-done:
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return slices.Clone(m.last), nil
}

// memberStatus is one member's answer to a check.
type memberStatus struct {
	id, leader uint64
	err        error
}

// check asks every member for its status, in parallel, names them if need
// be, and publishes the report; it closes done at the end.
func (m *members) check(done chan struct{}) {
	defer m.wg.Done()
	got := make([]memberStatus, len(m.endpoints))
	var wg sync.WaitGroup
	for i := range m.endpoints {
		wg.Go(func() { got[i] = m.status(i) })
	}
	wg.Wait()
	m.name(got)

	report := make([]backend.Member, len(m.endpoints))
	for i, ep := range m.endpoints {
		r := backend.Member{Endpoint: ep}
		st := got[i]
		if st.err == nil {
			m.ids[i] = st.id
			r.Answers = true
			if st.leader != 0 {
				r.Leader, r.LeaderName = memberID(st.leader), m.names[st.leader]
			}
		} else {
			r.Error = st.err.Error()
		}
		if id := m.ids[i]; id != 0 {
			r.ID, r.Name = memberID(id), m.names[id]
		}
		r.InUse, r.Streams = m.use.of(ep)
		report[i] = r
	}

	m.mu.Lock()
	m.last, m.lastAt, m.running = report, time.Now(), nil
	m.mu.Unlock()
	close(done)
}

// status asks member i for its Status on its check connection.
func (m *members) status(i int) memberStatus {
	p, err := m.probe(i)
	if err != nil {
		return memberStatus{err: err}
	}
	ctx, cancel := context.WithTimeout(checking(m.ctx, m.endpoints[i]), memberCheckTimeout)
	defer cancel()
	resp, err := pb.NewMaintenanceClient(p).Status(ctx, &pb.StatusRequest{})
	if err != nil {
		return memberStatus{err: memberError(err)}
	}
	return memberStatus{id: resp.GetHeader().GetMemberId(), leader: resp.GetLeader()}
}

// probe returns member i's check connection, dialled (lazily: gRPC
// connects at the first request) on first use. A connection that failed
// waits out gRPC's backoff, which grows to 2 minutes: it is told to try
// again now, so that a member back up is seen at the next check.
func (m *members) probe(i int) (*grpc.ClientConn, error) {
	if p := m.probes[i]; p != nil {
		retryNow(p)
		return p, nil
	}
	// Client.Dial uses the client's settings: TLS, the auth token, the
	// dial options (this stats handler among them).
	p, err := m.cli.Dial(m.endpoints[i])
	if err != nil {
		return nil, fmt.Errorf("dial %s: %w", m.endpoints[i], err)
	}
	m.probes[i] = p
	return p, nil
}

// name learns the names of the ids in got that have none, from the first
// member that answered (a serializable MemberList: its own copy of the
// membership, no quorum needed), at most once per memberNamesEvery.
func (m *members) name(got []memberStatus) {
	from := -1
	missing := false
	for i, st := range got {
		if st.err != nil {
			continue
		}
		if from < 0 {
			from = i
		}
		for _, id := range []uint64{st.id, st.leader} {
			if _, ok := m.names[id]; id != 0 && !ok {
				missing = true
			}
		}
	}
	if from < 0 || !missing || time.Since(m.namesAt) < memberNamesEvery {
		return
	}
	m.namesAt = time.Now()
	ctx, cancel := context.WithTimeout(checking(m.ctx, m.endpoints[from]), memberCheckTimeout)
	defer cancel()
	resp, err := pb.NewClusterClient(m.probes[from]).MemberList(ctx, &pb.MemberListRequest{Linearizable: false})
	if err != nil {
		return // unnamed until the next try
	}
	names := make(map[uint64]string, len(resp.GetMembers()))
	for _, mb := range resp.GetMembers() {
		names[mb.GetID()] = mb.GetName()
	}
	m.names = names
}

// memberID formats an etcd member id as etcdctl does.
func memberID(id uint64) string { return fmt.Sprintf("%x", id) }

// memberError says why a member did not answer: the class of the error
// (as in store_errors) and gRPC's message without its "rpc error" frame.
func memberError(err error) error {
	msg := err.Error()
	if s, ok := status.FromError(err); ok {
		msg = s.Message()
	}
	return fmt.Errorf("%s: %s", errorClass(err), msg)
}

// checkKey marks the context of a check's request with the member's
// endpoint, for memberUse.
type checkKey struct{}

func checking(ctx context.Context, endpoint string) context.Context {
	return context.WithValue(ctx, checkKey{}, endpoint)
}

// memberUse is a stats handler on every gRPC connection of one client (its
// balanced connection and the check connections): it keeps the transports
// open now, which of them carry checks, and the streams open per remote
// address. A transport that carries electd's requests, not checks, stands
// for a ready subconnection of the balanced connection.
type memberUse struct {
	mu      sync.Mutex
	conns   map[connKey]*connUse // transports open now
	streams map[string]int       // remote address → electd's streams open on it
	seen    map[string][]string  // endpoint → remote addresses its checks reached
}

// connKey names a transport by its two ends.
type connKey struct{ local, remote string }

// connUse is an open transport; check says it carries the checks.
type connUse struct{ check bool }

// rpcUse follows one attempt of a request.
type rpcUse struct {
	endpoint string // a check's member; "" for electd's own requests
	stream   bool
	on       string // the remote address its stream is counted on
}

type (
	connKeyKey struct{}
	rpcUseKey  struct{}
)

// maxSeen bounds the addresses remembered per endpoint (a host name may
// resolve to several).
const maxSeen = 4

func addrString(a net.Addr) string {
	if a == nil {
		return ""
	}
	return a.String()
}

func (u *memberUse) TagConn(ctx context.Context, info *stats.ConnTagInfo) context.Context {
	return context.WithValue(ctx, connKeyKey{}, connKey{addrString(info.LocalAddr), addrString(info.RemoteAddr)})
}

func (u *memberUse) HandleConn(ctx context.Context, s stats.ConnStats) {
	key, ok := ctx.Value(connKeyKey{}).(connKey)
	if !ok || !s.IsClient() {
		return
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch s.(type) {
	case *stats.ConnBegin:
		u.conns[key] = &connUse{}
	case *stats.ConnEnd:
		delete(u.conns, key)
	}
}

func (u *memberUse) TagRPC(ctx context.Context, _ *stats.RPCTagInfo) context.Context {
	endpoint, _ := ctx.Value(checkKey{}).(string)
	return context.WithValue(ctx, rpcUseKey{}, &rpcUse{endpoint: endpoint})
}

func (u *memberUse) HandleRPC(ctx context.Context, s stats.RPCStats) {
	r, ok := ctx.Value(rpcUseKey{}).(*rpcUse)
	if !ok || !s.IsClient() {
		return
	}
	switch s.(type) {
	case *stats.Begin, *stats.OutHeader, *stats.End:
	default:
		return // payloads, trailers: nothing to note, and no lock taken per message
	}
	u.mu.Lock()
	defer u.mu.Unlock()
	switch s := s.(type) {
	case *stats.Begin:
		r.stream = s.IsClientStream || s.IsServerStream
	case *stats.OutHeader: // the attempt has a transport
		remote := addrString(s.RemoteAddr)
		if r.endpoint != "" {
			if c := u.conns[connKey{addrString(s.LocalAddr), remote}]; c != nil {
				c.check = true
			}
			u.saw(r.endpoint, remote)
		} else if r.stream && r.on == "" {
			u.streams[remote]++
			r.on = remote
		}
	case *stats.End:
		if r.on != "" {
			if u.streams[r.on]--; u.streams[r.on] <= 0 {
				delete(u.streams, r.on)
			}
			r.on = ""
		}
	}
}

// saw records that endpoint's check reached remote.
func (u *memberUse) saw(endpoint, remote string) {
	s := u.seen[endpoint]
	if slices.Contains(s, remote) {
		return
	}
	if len(s) >= maxSeen {
		s = s[1:]
	}
	u.seen[endpoint] = append(slices.Clip(s), remote)
}

// of says whether electd's connection has a transport open to endpoint
// (one of the addresses its checks reached, or the endpoint itself before
// any did), and how many streams it has open there.
func (u *memberUse) of(endpoint string) (inUse bool, streams int) {
	u.mu.Lock()
	defer u.mu.Unlock()
	remotes := u.seen[endpoint]
	if len(remotes) == 0 {
		remotes = []string{endpoint}
	}
	for key, c := range u.conns {
		if !c.check && slices.Contains(remotes, key.remote) {
			inUse = true
			break
		}
	}
	for _, r := range remotes {
		streams += u.streams[r]
	}
	return inUse, streams
}
