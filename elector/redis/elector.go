package redis

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/life"
	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

var _ elector.Locker = (*Elector)(nil)

// errBusy refuses a second campaign on an Elector that is campaigning or leading.
var errBusy = life.ErrBusy

// Elector is one candidate in one Redis-backed election. Create it with New;
// it is safe for concurrent use.
type Elector struct {
	cfg   Config
	keys  keys
	ttlMS int64
	log   *slog.Logger
	inst  elector.Instrument
	core  *rediscore.Core // lifecycle, tokens seen, wake-ups, timing
	ctx   context.Context // core's: cancelled by Close

	bus  *bus
	view *view

	fails *elector.StoreLog // retried store failures, rate-limited
	// stepped is the latest server time (µs) at which a step of this
	// Elector's ran and was answered; every step carries it, so that a
	// state that lost the step's writes (restored under the same run)
	// starts a new epoch (see sawStep).
	stepped atomic.Int64
	// patience is how long the next request may wait for its reply
	// (rediskit.Patience): longer after timeouts, so that a slow store
	// is waited for instead of losing every connection to it.
	patience *rediskit.Patience
	// runEviction checks once whether the server may evict a run record.
	runEviction sync.Once
}

// New validates cfg and returns an Elector. It does not contact Redis.
func New(cfg Config) (*Elector, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	e := &Elector{
		cfg:   cfg,
		keys:  keysOf(cfg.Election, cfg.Client),
		ttlMS: rediscore.TTLMillis(cfg.Timing.TTL),
		log:   cfg.Logger.WithGroup("redis").With("election", cfg.Election, "id", cfg.ID),
		inst:  cfg.Instrument,
	}
	e.core = rediscore.New(cfg.Candidate, e.log)
	e.ctx = e.core.Ctx
	e.patience = rediskit.PatienceFor(e.core.CallTimeout(), cfg.Timing)
	e.fails = elector.NewStoreLog(cfg.Clock, e.log, cfg.Instrument).ClassifyWith(errorClass)
	e.bus = newBus(e)
	e.view = newView(e)
	e.checkClient()
	return e, nil
}

// checkClient warns when the client would let a stalled connection hold a
// request past its context deadline (safety does not depend on it: the
// local deadline rules; renewal cadence and Close's bound do).
func (e *Elector) checkClient() {
	var honours bool
	var read time.Duration
	switch c := e.cfg.Client.(type) {
	case *redis.Client:
		honours, read = c.Options().ContextTimeoutEnabled, c.Options().ReadTimeout
	case *redis.ClusterClient:
		honours, read = c.Options().ContextTimeoutEnabled, c.Options().ReadTimeout
	default:
		return
	}
	if !honours && (read <= 0 || read > e.cfg.Timing.RenewInterval) {
		e.log.Warn("redis client ignores context deadlines and its read timeout exceeds the renewal interval; a stalled connection can delay renewals and Close (set ContextTimeoutEnabled)",
			"read_timeout", read, "renew_interval", e.cfg.Timing.RenewInterval)
	}
}

// Wakeups counts how often a waiting campaign was woken (by a message naming
// it, or by the deadline of the candidate ahead of it) to re-check whether it
// leads. Renewals are not counted, nor are the re-checks after the
// subscription is (re)established, which follow the connection, not a change
// in the queue (as etcd's backend does not count a re-check after its watch
// breaks).
func (e *Elector) Wakeups() uint64 { return e.core.Wakeups() }

// Close ends any term (ErrClosed), leaves the queue (best effort, bounded by
// a short timeout), and stops every goroutine the Elector started. It does
// not close the Redis client. It is safe to call more than once.
func (e *Elector) Close() error {
	e.core.Close(func() {
		e.bus.close()
		e.view.leaders.Close()
	}, nil)
	return nil
}

// Slots is the number of candidates that may hold at once.
func (e *Elector) Slots() int { return e.cfg.Slots }

// step runs stepScript once. stale is an entry of ours to drop first;
// extra are the arguments after the fixed ones (handto's target).
func (e *Elector) step(ctx context.Context, mode, entry string, token uint64, stale string, extra ...any) (stepReply, error) {
	tok := ""
	if token != 0 {
		tok = fmt.Sprint(token)
	}
	slots := ""
	if n := e.Slots(); n > 1 {
		slots = fmt.Sprint(n)
	}
	stepped := ""
	if s := e.stepped.Load(); s != 0 {
		stepped = fmt.Sprint(s)
	}
	pending := ""
	if e.cfg.Replicas > 0 {
		pending = "1" // a grant counts once replicas have it: pending until renewed
	}
	gen, _ := e.bus.state()
	args := append([]any{mode, entry, e.ttlMS, e.cfg.ID, e.cfg.Address, e.keys.channel, tok, stale, slots, e.core.SeenArg(), stepped, pending}, extra...)
	v, err := e.runStep(ctx, mode != "leave" && mode != "handto", args...)
	e.patience.Observe(err)
	if err != nil {
		return stepReply{}, e.classify(err)
	}
	r, err := parseStep(v)
	if err != nil {
		return r, rediskit.Permanent(err)
	}
	e.core.SawToken(r.token)
	// The reply is as fresh as a read by the view, if the subscription did
	// not break meanwhile (offer checks the generation).
	if r.viewErr != nil {
		e.log.Warn("ignoring the leader view of a script reply", "err", r.viewErr)
	} else {
		e.sawStep(r.view.At)
		e.view.offer(r.view, gen)
	}
	return r, nil
}

// sawStep raises the latest time a step of ours was answered at to at, the
// server time the step script ran at. Only the replies of its own steps
// count: the script records that time in the state with the step's writes,
// so a later step that finds the state's record earlier than this proves
// that the state lost them.
func (e *Elector) sawStep(at time.Time) {
	us := at.UnixMicro()
	for {
		cur := e.stepped.Load()
		if us <= cur || e.stepped.CompareAndSwap(cur, us) {
			return
		}
	}
}

// classify classifies err, the failure of a request, and refreshes a
// cluster's slot map if a failover may have caused it (refreshSlots).
func (e *Elector) classify(err error) error {
	err = classify(err)
	e.refreshSlots(err)
	return err
}

// refreshSlots asks a cluster client to re-read the slot map after a
// request failed in a way a failover causes: go-redis keeps dialling a dead
// master until its map is 10 s old, far past a short lease.
func (e *Elector) refreshSlots(err error) {
	cc, ok := e.cfg.Client.(*redis.ClusterClient)
	if !ok {
		return
	}
	switch elector.ErrorClass(err) {
	case classConn, elector.ClassTimeout, "CLUSTERDOWN", "READONLY", "MASTERDOWN", "TRYAGAIN":
		cc.ReloadState(e.ctx) // asynchronous, and coalesced by go-redis
	}
}

// runStep runs stepScript with args. With Config.Replicas, and replicated
// set, a WAIT follows the script on its connection, and the reply counts
// only if enough replicas acknowledged it (else errUnreplicated): a grant
// or renewal that only the master has is none. With Config.Sentinels the
// reply then counts only once the sentinels confirmed, after it, the server
// it ran on as their master with no failover in progress (else
// errUnconfirmed). Leaving needs neither: an entry that stays behind
// expires.
func (e *Elector) runStep(ctx context.Context, replicated bool, args ...any) (any, error) {
	keys := e.keys.step()
	if e.cfg.Replicas == 0 || !replicated {
		return stepScript.Run(ctx, e.cfg.Client, keys, args...).Result()
	}
	for _, load := range []bool{false, true} {
		timeout := waitTimeout(ctx, e.core.CallTimeout())
		var script, wait, client *redis.Cmd
		var born *redis.StringCmd
		_, err := e.cfg.Client.Pipelined(ctx, func(p redis.Pipeliner) error {
			if load {
				script = stepScript.Eval(ctx, p, keys, args...)
			} else {
				script = stepScript.EvalSha(ctx, p, keys, args...)
			}
			wait = p.Do(ctx, "WAIT", e.cfg.Replicas, timeout.Milliseconds()+1)
			if e.cfg.Sentinels != nil {
				// The script has just recorded the server's run in born
				// (a new run starts a new epoch); CLIENT INFO names the
				// server's own address of this connection.
				born = p.HGet(ctx, e.keys.born, "run")
				client = p.Do(ctx, "CLIENT", "INFO")
			}
			return nil
		})
		switch {
		case !load && redis.HasErrorPrefix(script.Err(), "NOSCRIPT"):
			continue // the server lost its script cache: send the script
		case script.Err() != nil:
			return nil, script.Err()
		case err != nil && (client == nil || err != client.Err()):
			return nil, err // not CLIENT INFO's refusal, which confirmed weighs
		}
		if err := e.replicated(wait); err != nil {
			return nil, err
		}
		if err := e.confirmed(ctx, born, client); err != nil {
			return nil, err
		}
		return script.Val(), nil
	}
	return nil, errors.New("the step script is not in the server's cache after loading it")
}

// confirmed asks the sentinels, if any, to confirm the master of a step
// that has returned (Sentinels.confirm); born is the run its server
// recorded, client its CLIENT INFO (which an old or strict server may
// refuse: then only the run identifies it).
func (e *Elector) confirmed(ctx context.Context, born *redis.StringCmd, client *redis.Cmd) error {
	if e.cfg.Sentinels == nil {
		return nil
	}
	run, err := born.Result()
	if err != nil {
		return fmt.Errorf("read the server's run: %w", err)
	}
	info, _ := client.Text()
	return e.cfg.Sentinels.confirm(ctx, server{run: runID(run), addr: localAddr(info)})
}

// waitTimeout is the timeout of a WAIT sent under ctx (else within call):
// three quarters of the time left, so that its answer still arrives.
func waitTimeout(ctx context.Context, call time.Duration) time.Duration {
	left := call
	if dl, ok := ctx.Deadline(); ok {
		left = time.Until(dl)
	}
	return max(left*3/4, time.Millisecond)
}

// replicated checks a WAIT's answer: enough replicas, else errUnreplicated.
func (e *Elector) replicated(wait *redis.Cmd) error {
	acked, err := wait.Int64()
	switch {
	case err != nil:
		return fmt.Errorf("wait for replicas: %w", err)
	case acked < int64(e.cfg.Replicas):
		return fmt.Errorf("%w (%d of %d)", errUnreplicated, acked, e.cfg.Replicas)
	}
	return nil
}

// leave removes entry, and stale if not empty, with their term; it retries
// transient errors until ctx ends.
func (e *Elector) leave(ctx context.Context, op, entry, stale string) error {
	_, err := e.leaveBy(ctx, op, "leave", entry, stale)
	return err
}

// leaveBy runs a step of mode (leave or handto) that removes entry, until
// it is answered or ctx ends, and returns its reply.
func (e *Elector) leaveBy(ctx context.Context, op, mode, entry, stale string, extra ...any) (stepReply, error) {
	b := e.core.NewBackoff()
	for {
		cctx, cancel := e.request(ctx)
		r, err := e.step(cctx, mode, entry, 0, stale, extra...)
		cancel()
		if err == nil {
			e.fails.Answered(op)
			return r, nil
		}
		e.fails.Failed(op, err, "entry", entry)
		if isPermanent(err) || ctx.Err() != nil {
			e.fails.GaveUp(op)
			return r, &elector.StoreError{Op: op, Err: fmt.Errorf("remove candidate %s: %w", entry, err), Permanent: isPermanent(err)}
		}
		if !e.core.Sleep(ctx, b.Next()) {
			e.fails.GaveUp(op)
			return r, &elector.StoreError{Op: op, Err: fmt.Errorf("remove candidate %s: %w", entry, err)}
		}
	}
}

// cleanup removes entry (and stale) after a term or campaign ended, within a
// short bound and independently of any context that has ended.
func (e *Elector) cleanup(entry, stale string) {
	e.core.Cleanup(entry, func(ctx context.Context) error {
		return e.leave(ctx, "leave", entry, stale)
	}, "could not remove candidate; it expires after one ttl")
}

// request bounds one store request: by the Elector's patience, which
// starts at callTimeout.
func (e *Elector) request(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.patience.Timeout())
}
