package rediscore

import (
	"context"
	crand "crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"sync/atomic"
	"time"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/life"
	"github.com/electd/electd/elector/internal/rediskit"
	"github.com/electd/electd/internal/backoff"
)

// Core is the part of an Elector that the single-server (Sentinel,
// Cluster) backend and Redlock keep alike: its lifecycle (the campaign,
// the term and the goroutines it owns, Close), the highest token seen,
// the wake-up count, and the timing of its requests, backoffs and entries.
type Core struct {
	cand elector.Candidate
	log  *slog.Logger
	// Life owns the Elector's campaign, term and goroutines; Ctx is its
	// context, cancelled by Close.
	Life *life.Life
	Ctx  context.Context

	wakeups atomic.Uint64
	// seen is the highest fencing token this Elector has seen, its own or
	// another's; every step carries it, so that no server's token falls
	// below it, even after a server lost its state (see SawToken).
	seen atomic.Uint64
}

// New returns the Core of a candidate (validated) that logs to log.
func New(cand elector.Candidate, log *slog.Logger) *Core {
	c := &Core{cand: cand, log: log, Life: life.New()}
	c.Ctx = c.Life.Context()
	return c
}

// Wakeups counts the wake-ups of a waiting campaign (see Woke).
func (c *Core) Wakeups() uint64 { return c.wakeups.Load() }

// Woke counts one wake-up of a waiting campaign to re-check whether it
// leads.
func (c *Core) Woke() { c.wakeups.Add(1) }

// Close ends any term (ErrClosed) and stops every goroutine Life started:
// stop closes what they wait on (the bus, the leader hub), drained (may be
// nil) waits for requests that outlive them. It is safe to call more than
// once.
func (c *Core) Close(stop, drained func()) {
	if c.Life.Close(stop, drained) {
		c.log.Debug("closed")
	}
}

// Campaign runs a campaign under Life (one at a time): it subscribes
// through start, waits at most CallTimeout for waitLive (so that the
// message naming the new entry is not missed), then runs run. An error
// after Close is ErrClosed.
func (c *Core) Campaign(ctx context.Context, start func(), waitLive func(context.Context, time.Duration), run func(context.Context) (*elector.Term, error)) (*elector.Term, error) {
	ctx, end, err := c.Life.Campaign(ctx)
	if err != nil {
		return nil, err
	}
	defer end()

	// Subscribe before joining so that a message naming us is not missed.
	start()
	waitLive(ctx, c.CallTimeout())

	term, err := run(ctx)
	if err != nil && c.Ctx.Err() != nil {
		return nil, elector.ErrClosed
	}
	return term, err
}

// MaxToken is the largest token the scripts can count past: Lua numbers
// are doubles, exact to 2^53 (server µs reach it in the year 2255).
const MaxToken = 1 << 53

// SawToken raises the highest token seen to tok. Every step sends it, and
// the step script raises the stored token to it before granting: after a
// restart or failover that lost the token key, tokens are floored by the
// server's TIME, and if that clock lags they would go back; with the
// token any surviving candidate saw, they still grow.
func (c *Core) SawToken(tok uint64) {
	if tok > MaxToken {
		return // not a token of ours: the scripts' numbers are doubles
	}
	for {
		cur := c.seen.Load()
		if tok <= cur || c.seen.CompareAndSwap(cur, tok) {
			return
		}
	}
}

// Seen is the highest token seen (0: none).
func (c *Core) Seen() uint64 { return c.seen.Load() }

// SeenArg is Seen as a script argument: "" for none.
func (c *Core) SeenArg() string {
	if s := c.seen.Load(); s != 0 {
		return fmt.Sprint(s)
	}
	return ""
}

// CallTimeout bounds one request to one server on an open connection that
// answers as it should: a reply later than one renewal interval is late,
// the next renewal is due. After a timeout the next request to that
// server waits longer (rediskit.Patience, which starts at it).
func (c *Core) CallTimeout() time.Duration {
	return max(c.cand.Timing.RenewInterval, 50*time.Millisecond)
}

// CleanupTimeout bounds the removal of an entry after a term or campaign
// ended (Timing.CleanupTimeout).
func (c *Core) CleanupTimeout() time.Duration { return c.cand.Timing.CleanupTimeout() }

// Sleep waits d on the configured clock; false if ctx ended first.
func (c *Core) Sleep(ctx context.Context, d time.Duration) bool {
	return clock.Sleep(ctx, c.cand.Clock, d) == nil
}

// NewBackoff is the backoff of a waiter's requests (Timing.WaitBackoff).
func (c *Core) NewBackoff() *backoff.Backoff { return c.cand.Timing.WaitBackoff() }

// RenewBackoff is the backoff of a leader's renewals (Timing.RenewBackoff).
func (c *Core) RenewBackoff() *backoff.Backoff { return c.cand.Timing.RenewBackoff() }

// NewEntry returns a fresh queue entry for this candidate: its id and a
// random suffix, so that every candidacy is distinct even for equal ids.
func (c *Core) NewEntry() string {
	var b [8]byte
	_, _ = crand.Read(b[:])
	return c.cand.ID + "#" + hex.EncodeToString(b[:])
}

// WakeSlack is added to a moment read from a server before re-checking, so
// that the re-check lands after it on the server too.
const WakeSlack = 3 * time.Millisecond

// TTLMillis is the TTL the servers enforce, rounded up to their 1 ms
// resolution so that a server's lease is never shorter than the local one.
func TTLMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}

// StoreError reports err, the failure of operation op that the caller
// returns rather than retries, to inst, and returns it as an
// *elector.StoreError, permanent if rediskit says so.
func StoreError(inst elector.Instrument, op string, err error) error {
	inst.StoreError(op, err)
	return &elector.StoreError{Op: op, Err: err, Permanent: rediskit.IsPermanent(err)}
}

// LeaderOrNone returns l, or elector.ErrNoLeader (with l zero) if there is
// none: what Leader answers.
func LeaderOrNone(l elector.Leader) (elector.Leader, error) {
	if l.IsZero() {
		return l, elector.ErrNoLeader
	}
	return l, nil
}
