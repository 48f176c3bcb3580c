package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// Elector is an etcd-backed candidate. Its methods are safe for concurrent use.
type Elector struct {
	client   *clientv3.Client
	pins     *pins // a connection per member, for proved renewals (renewal.go)
	id, addr string
	pfx      string
	timing   elector.Timing
	ttlSec   int64
	clk      clock.Clock
	log      *slog.Logger
	ins      elector.Instrument
	fails    *elector.StoreLog // retried store failures, rate-limited

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the Elector starts

	wakeups atomic.Uint64
	// watching counts the claims that found a candidate ahead and began
	// to watch it: from then on that candidate's deletion is seen however
	// soon it comes (the watch starts at the claim's revision).
	watching atomic.Uint64
	// unclaimed counts the terms this candidate began on its
	// predecessor's deletion, by a read of the election (firstNow),
	// without a claim of its own.
	unclaimed atomic.Uint64
	expired   atomic.Uint64 // leaders' leases this candidate proved expired and revoked
	slots     int
	runKey    string
	name      string // the election

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}

	viewOnce sync.Once
	hub      *elector.Hub
}

var _ elector.Locker = (*Elector)(nil)

// New validates cfg and returns a candidate. It does not contact the store.
func New(cfg Config) (*Elector, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Elector{
		client:   cfg.Client,
		pins:     newPins(cfg.Client),
		id:       cfg.ID,
		addr:     cfg.Address,
		pfx:      cfg.Prefix + cfg.Election + "/",
		timing:   cfg.Timing,
		ttlSec:   int64((cfg.Timing.TTL + time.Second - 1) / time.Second),
		clk:      cfg.Clock,
		log:      cfg.Logger.WithGroup("etcd").With("election", cfg.Election, "id", cfg.ID),
		ins:      cfg.Instrument,
		ctx:      ctx,
		cancel:   cancel,
		sessions: map[*session]struct{}{},
		hub:      elector.NewHub(),
		runKey:   cfg.RunPrefix + cfg.Election,
		name:     cfg.Election,
		slots:    cfg.Slots,
	}
	e.fails = elector.NewStoreLog(e.clk, e.log, cfg.Instrument).ClassifyWith(errorClass)
	return e, nil
}

// Slots is the number of candidates that may hold at once.
func (e *Elector) Slots() int { return e.slots }

// Wakeups counts how often a waiting campaign was woken by a predecessor's
// deletion to re-check whether it leads.
func (e *Elector) Wakeups() uint64 { return e.wakeups.Load() }

// Close ends any term (ErrClosed), revokes this candidate's leases, and
// waits for every goroutine the Elector started. It is idempotent.
func (e *Elector) Close() error {
	e.mu.Lock()
	if e.closed {
		e.mu.Unlock()
		return nil
	}
	e.closed = true
	live := make([]*session, 0, len(e.sessions))
	for s := range e.sessions {
		live = append(live, s)
	}
	e.mu.Unlock()
	for _, s := range live {
		s.dl.End(elector.ErrClosed)
	}
	e.cancel()
	e.hub.Close()
	e.wg.Wait()
	return e.pins.close()
}

// firstPin picks the member a renewal loop or a lease watch starts with:
// at random, so that copies spread over the members as the client's
// balancer spreads its requests.
func (e *Elector) firstPin() int {
	if e.pins.n() == 0 {
		return 0 // at fails
	}
	return rand.IntN(e.pins.n())
}

// value is what a candidate's key holds. Slots is omitted for a plain
// election (1), so such keys read as before.
type value struct {
	ID      string `json:"id"`
	Address string `json:"address,omitempty"`
	Slots   int    `json:"slots,omitempty"`
	// Since is set by the candidate once it leads (its own clock), so that
	// every copy reports the same start of the term.
	Since time.Time `json:"since,omitzero"`
	// RenewAt and RenewEvery (a Go duration), set with Since, are the leader's renewal
	// grid: it sends its renewals at RenewAt + k·RenewEvery (its wall
	// clock). The head waiter looks at the leader's lease just after each
	// renewal should have made it to the store (expire.go). A hint only:
	// nothing safety-relevant depends on it being right.
	RenewAt    time.Time `json:"renew_at,omitzero"`
	RenewEvery string    `json:"renew_every,omitempty"`
}

// slots is the slot count the candidate was queued with (absent: 1).
func (v value) slots() int { return max(v.Slots, 1) }

// grid is the leader's renewal grid, if its value names one.
func (v value) grid() (at time.Time, every time.Duration, ok bool) {
	every, err := time.ParseDuration(v.RenewEvery)
	return v.RenewAt, every, err == nil && !v.RenewAt.IsZero() && every > 0
}

// value is a waiting candidate's.
func (e *Elector) value() string { return e.encode(value{}) }

// leaderValue is a leading candidate's: since its term began, renewing on
// s's grid.
func (e *Elector) leaderValue(s *session, since time.Time) string {
	return e.encode(value{
		Since:      since.UTC().Round(0),
		RenewAt:    s.origin.UTC().Round(0),
		RenewEvery: e.timing.RenewInterval.String(),
	})
}

func (e *Elector) encode(v value) string {
	v.ID, v.Address = e.id, e.addr
	if n := e.Slots(); n > 1 {
		v.Slots = n
	}
	b, err := json.Marshal(v)
	if err != nil { // cannot happen for strings, ints and times
		panic(fmt.Sprintf("marshal candidate value: %v", err))
	}
	return string(b)
}

func decodeValue(b []byte) value {
	var v value
	if err := json.Unmarshal(b, &v); err != nil || v.ID == "" {
		// A key written by another tool (e.g. etcdctl elect): show its value.
		v.ID = string(b)
	}
	return v
}

// opTimeout bounds one store request outside the renewal loop.
func (e *Elector) opTimeout() time.Duration {
	return max(e.timing.RenewInterval, time.Second)
}

// wait sleeps d on the Elector's clock or until ctx ends.
func (e *Elector) wait(ctx context.Context, d time.Duration) error { return clock.Sleep(ctx, e.clk, d) }

// storeErr wraps a failed store operation, marking errors a retry cannot fix.
func (e *Elector) storeErr(op string, err error) error {
	err = elector.Classify(errorClass(err), err)
	e.ins.StoreError(op, err)
	return &elector.StoreError{Op: op, Err: err, Permanent: permanent(err)}
}

var errNotHead = errors.New("campaign returned but this candidate is not first in line")
