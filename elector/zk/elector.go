package zk

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
)

// Config is one candidate on one ZooKeeper store.
type Config struct {
	elector.Candidate
	// Store is the ensemble and the credentials (Dial's Conn).
	Store *Conn
}

// Elector is one candidate in one election on ZooKeeper, with a session of
// its own.
type Elector struct {
	cfg  Config
	base string // the election's node: [chroot]/electd/elections/NAME
	// renewals is the node proofs write (stamp): [chroot]/electd/renewals/NAME
	renewals string
	log      *slog.Logger

	wakeups atomic.Uint64
	stamped atomic.Bool // the renewals node was seen to exist (join)

	mu     sync.Mutex
	sess   *session      // nil before the first request and after a reset
	warned int64         // the session whose negotiated timeout was logged
	probed time.Duration // the least session timeout a server grants; 0 until probed

	closed    chan struct{}
	closeOnce sync.Once
	wg        sync.WaitGroup // the terms' keepers and the observers
}

var (
	_ elector.Locker = (*Elector)(nil)
	_ elector.Queuer = (*Elector)(nil)
)

// New validates cfg and returns its candidate; it contacts nothing.
func New(cfg Config) (*Elector, error) {
	c, err := cfg.Candidate.Validate()
	if err != nil {
		return nil, err
	}
	cfg.Candidate = c
	if cfg.Store == nil {
		return nil, elector.Configf("store", "no ZooKeeper store")
	}
	return &Elector{cfg: cfg, base: cfg.Store.path("/electd/elections/" + cfg.Election),
		renewals: cfg.Store.path("/electd/renewals/" + cfg.Election),
		log:      cfg.Logger.With("election", cfg.Election, "id", cfg.ID), closed: make(chan struct{})}, nil
}

// session returns the elector's session, opening it on first use (and
// after a reset).
func (e *Elector) session() (*session, error) {
	e.probe()
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.closed:
		return nil, elector.ErrClosed
	default:
	}
	if e.sess == nil {
		s, err := e.cfg.Store.openOn(e.cfg.Timing.TTL, e.cfg.Clock)
		if err != nil {
			return nil, err
		}
		e.sess = s
	}
	return e.sess, nil
}

// reset closes s, the elector's session, when a request was abandoned or
// a node could not be deleted: whatever the session holds goes with it,
// and the next request opens a new one.
func (e *Elector) reset(s *session, why error) {
	e.mu.Lock()
	if e.sess == s {
		e.sess = nil
	}
	e.mu.Unlock()
	e.log.Info("closing the zookeeper session, its nodes go with it", "why", why)
	s.close()
}

// Close ends any term and candidacy (closing the session deletes its
// nodes) and stops the elector's goroutines.
func (e *Elector) Close() error {
	e.closeOnce.Do(func() {
		e.mu.Lock()
		close(e.closed) // under mu: see spawn
		s := e.sess
		e.sess = nil
		e.mu.Unlock()
		if s != nil {
			s.close()
		}
	})
	e.wg.Wait()
	return nil
}

// spawn runs f in a goroutine that Close waits for, and reports true; once
// Close has begun it reports false and does not run f.
func (e *Elector) spawn(f func()) bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	select {
	case <-e.closed:
		return false
	default:
	}
	e.wg.Add(1)
	go func() {
		defer e.wg.Done()
		f()
	}()
	return true
}

// Wakeups counts how often a waiting campaign was woken by a watch.
func (e *Elector) Wakeups() uint64 { return e.wakeups.Load() }

// timing is the candidate's timing on a session's negotiated timeout: the
// ensemble clamps the asked timeout (--ttl) to [2, 20] of its ticks, and
// the session lasts what it negotiated. The renewal interval keeps its
// ratio to the TTL, and Lag is the renewal's (lag): a renewal's evidence
// is a request sent lag before its Sync, which the room for a missed
// renewal and the supervisor's stop budget must leave. A negotiated
// timeout that differs is logged once per session.
func (e *Elector) timing(g gen) (elector.Timing, error) {
	want, got := e.cfg.Timing, g.timeout
	t := want
	if got != want.TTL {
		t.TTL = got
		t.RenewInterval = time.Duration(float64(want.RenewInterval) * float64(got) / float64(want.TTL))
		e.mu.Lock()
		first := e.warned != g.id
		e.warned = g.id
		e.mu.Unlock()
		if first {
			e.log.Warn("the zookeeper ensemble negotiated another session timeout than --ttl: deadlines run on the negotiated one",
				"ttl", want.TTL, "negotiated", got, "renew_interval", t.RenewInterval, "session", fmt.Sprintf("%#x", g.id))
		}
	}
	t.Lag = e.lag(t)
	if err := t.Validate(); err != nil {
		return t, elector.Configf("ttl", "the ensemble negotiated a session timeout of %s for --ttl %s (it clamps it to 2..20 ticks), with a renewal lag of %s (¾ of its tick and 20ms), which the timing rule refuses: %v", got, want.TTL, t.Lag, err)
	}
	return t, nil
}

// probe learns, before the elector opens its first session (so that it
// holds one connection at a time), the least session timeout a server
// grants; a failed probe is tried again before the next session.
func (e *Elector) probe() {
	e.mu.Lock()
	done := e.probed != 0 || e.sess != nil
	e.mu.Unlock()
	select {
	case <-e.closed:
		done = true
	default:
	}
	if done {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), e.cfg.Timing.TTL)
	defer cancel()
	d, err := e.cfg.Store.probeMinTimeout(ctx)
	if err != nil {
		e.log.Debug("the servers' tick is bounded by half the session timeout", "err", err)
		return
	}
	e.mu.Lock()
	e.probed = d
	e.mu.Unlock()
}

// lag is how long before a Sync is sent the answer to a request on its
// connection must have been read for the request to count (lagOf): the tick is bounded by half the least
// session timeout a server grants (probe), and by half the negotiated
// timeout t.TTL.
func (e *Elector) lag(t elector.Timing) time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	return lagOf(tickOf(t.TTL, e.probed))
}

// nodeData is what a candidate's node holds.
type nodeData struct {
	ID      string    `json:"id"`
	Address string    `json:"address,omitempty"`
	Slots   int       `json:"slots"`
	Since   time.Time `json:"since,omitzero"` // set by the holder when its term begins
}

func (e *Elector) data(since time.Time) []byte {
	b, err := json.Marshal(nodeData{ID: e.cfg.ID, Address: e.cfg.Address, Slots: e.cfg.Slots, Since: since})
	if err != nil {
		panic(fmt.Sprintf("zk: encode node data: %v", err)) // plain strings, ints and a time
	}
	return b
}

// candidatePrefix starts the name of every candidate node
// (CreateProtectedEphemeralSequential adds "_c_GUID-" before it).
const candidatePrefix = "c-"

// seqOf is the sequence number of a candidate node's name, or false for
// another child (the run record).
func seqOf(name string) (uint64, bool) {
	if !strings.HasPrefix(name, "_c_") || len(name) < 10 || !strings.Contains(name, "-"+candidatePrefix) {
		return 0, false
	}
	n, err := strconv.ParseUint(name[len(name)-10:], 10, 64)
	return n, err == nil
}

// line is the candidate nodes among children, in arrival order.
func line(children []string) []string {
	var l []string
	for _, c := range children {
		if _, ok := seqOf(c); ok {
			l = append(l, c)
		}
	}
	slices.SortFunc(l, func(a, b string) int {
		x, _ := seqOf(a)
		y, _ := seqOf(b)
		return int(x) - int(y)
	})
	return l
}

// children lists the election's candidate nodes in order; an election not
// yet created has none.
func (e *Elector) children(ctx context.Context, s *session) ([]string, error) {
	names, err := do(ctx, s, func(z *zk.Conn) ([]string, error) {
		c, _, err := z.Children(e.base)
		return c, err
	})
	if errors.Is(err, zk.ErrNoNode) {
		return nil, nil
	}
	return line(names), err
}

// node reads one candidate node; false if it is gone.
func (e *Elector) node(ctx context.Context, s *session, name string) (nodeData, *zk.Stat, bool, error) {
	type got struct {
		b  []byte
		st *zk.Stat
	}
	r, err := do(ctx, s, func(z *zk.Conn) (got, error) {
		b, st, err := z.Get(e.base + "/" + name)
		return got{b, st}, err
	})
	switch {
	case errors.Is(err, zk.ErrNoNode):
		return nodeData{}, nil, false, nil
	case err != nil:
		return nodeData{}, nil, false, err
	}
	return decode(r.b), r.st, true, nil
}

// decode reads a candidate node's data; data that is not electd's (written
// by another tool) is a candidate all the same, by the ID of its text.
func decode(b []byte) nodeData {
	var d nodeData
	if err := json.Unmarshal(b, &d); err != nil {
		d = nodeData{ID: string(b)}
	}
	if d.Slots == 0 {
		d.Slots = 1
	}
	return d
}

// Leader reads the first candidate node: the leader (with slots, the
// first holder) once it has written its term's start.
func (e *Elector) Leader(ctx context.Context) (elector.Leader, error) {
	s, err := e.session()
	if err != nil {
		return elector.Leader{}, err
	}
	if _, err := s.ready(ctx); err != nil {
		return elector.Leader{}, &elector.StoreError{Op: "leader", Err: err}
	}
	for {
		lu, err := e.line(ctx, s)
		if err != nil {
			return elector.Leader{}, storeErr("leader", err)
		}
		l := lu.eligible()
		if len(l) == 0 {
			return elector.Leader{}, elector.ErrNoLeader
		}
		d, st, ok, err := e.node(ctx, s, l[0])
		if err != nil {
			return elector.Leader{}, storeErr("leader", err)
		}
		switch {
		case ok && d.Since.IsZero():
			return elector.Leader{}, elector.ErrNoLeader // first in line, its term not begun
		case ok:
			return leaderOf(d, st), nil
		}
		// gone between the two reads: read again
	}
}

func leaderOf(d nodeData, st *zk.Stat) elector.Leader {
	return elector.Leader{ID: d.ID, Address: d.Address, Token: uint64(st.Czxid), Since: d.Since}
}

// storeErr wraps a request's error as the elector package reports it.
func storeErr(op string, err error) error {
	if errors.Is(err, context.Canceled) || errors.Is(err, context.DeadlineExceeded) || errors.Is(err, elector.ErrClosed) {
		return err
	}
	return &elector.StoreError{Op: op, Err: err, Permanent: permanent(err)}
}
