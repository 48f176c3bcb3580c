package etcd

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unicode"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// DefaultPrefix is where elections live in the key space.
const DefaultPrefix = "/electd/elections/"

// Config configures one candidate.
type Config struct {
	// Client is the etcd client; the caller owns it (Close does not close it).
	Client *clientv3.Client
	// Election names the election; candidates of one election share it.
	Election string
	// ID is this candidate's identity, reported as the leader's id.
	ID string
	// Address is published with leadership (e.g. the service's URL).
	Address string
	// Prefix of the key space; DefaultPrefix when empty.
	Prefix string
	// Timing of the lease; zero fields take elector defaults. etcd leases
	// have whole-second TTLs: a fractional TTL is rounded up for the store
	// (safe: the store then holds the lease longer than we rely on) and kept
	// as given for the local deadline.
	Timing elector.Timing
	// Clock for deadlines; clock.Real when nil.
	Clock clock.Clock
	// Logger, discarded when nil.
	Logger *slog.Logger
	// Instrument counts store errors; none when nil.
	Instrument elector.Instrument
	// Slots lets up to Slots candidates hold at once (a semaphore); 0 or 1
	// is a plain election. Every candidate of an election must agree.
	Slots int
	// RunPrefix is where once-per-period run records live, one key per
	// election; DefaultRunPrefix when empty. It must not lie under Prefix.
	RunPrefix string
}

// DefaultRunPrefix is where once-per-period run records live.
const DefaultRunPrefix = "/electd/runs/"

// Elector is an etcd-backed candidate. Its methods are safe for concurrent use.
type Elector struct {
	client   *clientv3.Client
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
	slots   atomic.Int64
	runKey  string
	name    string // the election

	mu       sync.Mutex
	closed   bool
	sessions map[*session]struct{}

	viewOnce sync.Once
	hub      *elector.Hub
}

var (
	_ elector.Elector       = (*Elector)(nil)
	_ elector.WakeupCounter = (*Elector)(nil)
	_ elector.Slotted       = (*Elector)(nil)
	_ elector.TryCampaigner = (*Elector)(nil)
	_ elector.RunRecorder   = (*Elector)(nil)
)

// New validates cfg and returns a candidate. It does not contact the store.
func New(cfg Config) (*Elector, error) {
	if cfg.Client == nil {
		return nil, elector.Configf("store", "an etcd client is required")
	}
	if err := ValidateName("election", cfg.Election); err != nil {
		return nil, err
	}
	if err := ValidateName("id", cfg.ID); err != nil {
		return nil, err
	}
	t := cfg.Timing.WithDefaults()
	if err := t.Validate(); err != nil {
		return nil, err
	}
	pfx := cfg.Prefix
	if pfx == "" {
		pfx = DefaultPrefix
	}
	if !strings.HasSuffix(pfx, "/") {
		pfx += "/"
	}
	slots := cfg.Slots
	if slots == 0 {
		slots = 1
	}
	if err := elector.ValidateSlots(slots); err != nil {
		return nil, err
	}
	runPfx := cfg.RunPrefix
	if runPfx == "" {
		runPfx = DefaultRunPrefix
	}
	if !strings.HasSuffix(runPfx, "/") {
		runPfx += "/"
	}
	if strings.HasPrefix(runPfx, pfx) || strings.HasPrefix(pfx, runPfx) {
		return nil, elector.Configf("store", "run-record prefix %q and election prefix %q must not contain each other", runPfx, pfx)
	}
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	ctx, cancel := context.WithCancel(context.Background())
	e := &Elector{
		client:   cfg.Client,
		id:       cfg.ID,
		addr:     cfg.Address,
		pfx:      pfx + cfg.Election + "/",
		timing:   t,
		ttlSec:   int64((t.TTL + time.Second - 1) / time.Second),
		clk:      clock.OrReal(cfg.Clock),
		log:      log.WithGroup("etcd").With("election", cfg.Election, "id", cfg.ID),
		ins:      elector.OrNop(cfg.Instrument),
		ctx:      ctx,
		cancel:   cancel,
		sessions: map[*session]struct{}{},
		hub:      elector.NewHub(),
		runKey:   runPfx + cfg.Election,
		name:     cfg.Election,
	}
	e.fails = elector.NewStoreLog(e.clk, e.log)
	e.slots.Store(int64(slots))
	return e, nil
}

// SetSlots makes the election a semaphore of n slots (1: a plain election).
// Call it before Campaign; every candidate of the election must agree.
func (e *Elector) SetSlots(n int) error {
	if err := elector.ValidateSlots(n); err != nil {
		return err
	}
	e.slots.Store(int64(n))
	return nil
}

// Slots is the number of candidates that may hold at once.
func (e *Elector) Slots() int { return int(e.slots.Load()) }

// ValidateName refuses names that are empty, too long, or could escape
// their place in the key space.
func ValidateName(field, v string) error {
	switch {
	case v == "":
		return elector.Configf(field, "must not be empty")
	case len(v) > 128:
		return elector.Configf(field, "must be at most 128 bytes, got %d", len(v))
	case strings.ContainsAny(v, "/{}"):
		return elector.Configf(field, "%q must not contain '/', '{' or '}'", v)
	case v == "." || v == "..":
		return elector.Configf(field, "%q is not a valid name", v)
	}
	for _, r := range v {
		if unicode.IsSpace(r) || unicode.IsControl(r) || r == unicode.ReplacementChar {
			return elector.Configf(field, "%q must not contain whitespace, control or invalid UTF-8 characters", v)
		}
	}
	return nil
}

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
	return nil
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
}

// slots is the slot count the candidate was queued with (absent: 1).
func (v value) slots() int { return max(v.Slots, 1) }

func (e *Elector) value() string { return e.valueSince(time.Time{}) }

func (e *Elector) valueSince(since time.Time) string {
	v := value{ID: e.id, Address: e.addr, Since: since.UTC().Round(0)}
	if n := e.Slots(); n > 1 {
		v.Slots = n
	}
	b, err := json.Marshal(v)
	if err != nil { // cannot happen for two strings
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
func (e *Elector) wait(ctx context.Context, d time.Duration) error {
	t := e.clk.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

// storeErr wraps a failed store operation, marking errors a retry cannot fix.
func (e *Elector) storeErr(op string, err error) error {
	e.ins.StoreError(op, err)
	return &elector.StoreError{Op: op, Err: err, Permanent: permanent(err)}
}

var errNotHead = errors.New("campaign returned but this candidate is not first in line")
