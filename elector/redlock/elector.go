package redlock

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
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

// Elector is one candidate in one election kept by a quorum of independent
// Redis servers. Create it with New; it is safe for concurrent use.
type Elector struct {
	cfg   Config
	keys  keys
	ttlMS int64
	m     int // majority of the servers
	log   *slog.Logger
	inst  elector.Instrument
	core  *rediscore.Core // lifecycle, tokens seen, wake-ups, timing
	ctx   context.Context // core's: cancelled by Close
	calls sync.WaitGroup  // requests of a round, which may outlive it (see round)

	bus  *bus
	view *view

	fails []*elector.StoreLog // per server: retried failures, rate-limited
	// patience is, per server, how long its next request may wait for its
	// reply (rediskit.Patience): longer after timeouts, so that a slow
	// server is waited for instead of losing every connection to it.
	patience []*rediskit.Patience
	// recorded is the run record RecordRun wrote last (see repairRun).
	recorded recorded
}

// New validates cfg and returns an Elector. It contacts no server.
func New(cfg Config) (*Elector, error) {
	cfg, err := cfg.validate()
	if err != nil {
		return nil, err
	}
	e := &Elector{
		cfg:   cfg,
		keys:  keysIn(cfg.Election, rediskit.DB(cfg.Servers[0].Client)),
		ttlMS: rediscore.TTLMillis(cfg.Timing.TTL),
		m:     majority(len(cfg.Servers)),
		log:   cfg.Logger.WithGroup("redlock").With("election", cfg.Election, "id", cfg.ID),
		inst:  cfg.Instrument,
	}
	e.core = rediscore.New(cfg.Candidate, e.log)
	e.ctx = e.core.Ctx
	for _, s := range cfg.Servers {
		inst := serverInstrument{Instrument: cfg.Instrument, server: s.Addr}
		e.fails = append(e.fails, elector.NewStoreLog(cfg.Clock, e.log.With("server", s.Addr), inst).ClassifyWith(elector.ErrorClass))
		e.patience = append(e.patience, rediskit.PatienceFor(e.core.CallTimeout(), cfg.Timing))
	}
	e.bus = newBus(e)
	e.view = newView(e)
	return e, nil
}

// serverInstrument names the server in every error it reports
// (elector.WithServer), for electd_store_errors_total{server}.
type serverInstrument struct {
	elector.Instrument
	server string
}

func (s serverInstrument) StoreError(op string, err error) {
	s.Instrument.StoreError(op, elector.WithServer(s.server, err))
}

func (s serverInstrument) StoreAnswered(op string) { s.Instrument.StoreAnswered(op) }

// Wakeups counts how often a waiting campaign was woken (by a message
// naming it as the head of a server's queue, or by the moment a majority
// may let it lead) to re-check whether it leads.
func (e *Elector) Wakeups() uint64 { return e.core.Wakeups() }

// Close ends any term (ErrClosed), leaves every server's queue (best
// effort, bounded by a short timeout), and stops every goroutine the
// Elector started. It does not close the clients. It is safe to call more
// than once.
func (e *Elector) Close() error {
	e.core.Close(func() {
		e.bus.close()
		e.view.leaders.Close()
	}, e.calls.Wait)
	return nil
}

// result is one server's answer in a round.
type result struct {
	sent time.Time
	r    stepReply
	err  error
}

// step runs stepScript on server i.
func (e *Elector) step(ctx context.Context, i int, mode, entry, ord string, commit uint64, since time.Time, claim bool) (stepReply, error) {
	tok, sinceArg := "", ""
	if commit != 0 {
		tok, sinceArg = fmt.Sprint(commit), fmt.Sprint(since.UnixMicro())
	}
	claims := "0"
	if claim {
		claims = "1"
	}
	gen := e.bus.gen(i)
	v, err := rediscore.Call(ctx, stepScript, e.cfg.Servers[i].Client, e.keys.step(), e.patience[i], rediskit.Classify,
		mode, entry, e.ttlMS, e.cfg.ID, e.cfg.Address, e.keys.channel, ord, e.core.SeenArg(), tok, sinceArg, claims)
	if err != nil {
		return stepReply{}, err
	}
	r, err := parseStep(v)
	if err != nil {
		return r, rediskit.Permanent(err)
	}
	e.core.SawToken(r.floor)
	e.view.offer(i, r.view, gen)
	return r, nil
}

// round runs a step on every server i with want[i] (nil: all) at once,
// each under its own timeout, and returns each answer with its send time.
// claim says whether the entry asks to be granted (see stepScript).
//
// A server that does not answer (black-holed: no reply, no refusal) would
// hold every round to its timeout although a majority answered at once.
// So once the round's outcome is decided (a majority of the servers
// answered usefully, see useful, those not asked counting as such: they
// are on their own schedule; or too many did not), the round waits for the
// others only as long again as it took, at least stragglerGrace, and
// returns without them: their answers count as failed (a request may
// still land; a late acknowledgement is never used). The stragglers run on
// to their own timeout, owned by the Elector (Close waits for them, in
// calls).
func (e *Elector) round(ctx context.Context, want []bool, op, mode, entry, ord string, commit uint64, since time.Time, claim bool) []result {
	n := len(e.cfg.Servers)
	res := make([]result, n)
	start := e.cfg.Clock.Now()
	type answer struct {
		i int
		r result
	}
	answers := make(chan answer, n) // buffered: a straggler never blocks
	pending := make([]bool, n)
	asked := 0
	for i := range n {
		if want != nil && !want[i] {
			continue
		}
		asked++
		pending[i] = true
		call := func() {
			cctx, cancel := e.request(ctx, i)
			defer cancel()
			var r result
			r.sent = e.cfg.Clock.Now()
			r.r, r.err = e.step(cctx, i, mode, entry, ord, commit, since, claim)
			if r.err == nil {
				e.fails[i].Answered(op)
			} else if ctx.Err() == nil {
				e.fails[i].Failed(op, r.err, "entry", entry)
			}
			answers <- answer{i, r}
		}
		e.calls.Add(1)
		go func() {
			defer e.calls.Done()
			call()
		}()
	}
	ok, no, got := n-asked, 0, 0
	var grace <-chan time.Time
	if ok >= e.m && asked > 0 {
		// Only servers outside the majority were asked (a leader's retry
		// of a failing server): give them a quarter of their timeout.
		t := e.cfg.Clock.NewTimer(max(e.core.CallTimeout()/4, stragglerGrace))
		defer t.Stop()
		grace = t.C()
	}
	for got < asked {
		select {
		case a := <-answers:
			got++
			res[a.i], pending[a.i] = a.r, false
			if useful(mode, commit, a.r) {
				ok++
			} else {
				no++
			}
			// Decided either way: a majority answered usefully, or so
			// many did not that the others cannot make one.
			decided := ok >= e.m || no > n-e.m
			if decided && grace == nil && got < asked {
				t := e.cfg.Clock.NewTimer(max(e.cfg.Clock.Now().Sub(start), stragglerGrace))
				defer t.Stop()
				grace = t.C()
			}
		case <-grace:
			for i, p := range pending {
				if p {
					res[i] = result{sent: start, err: errStraggler}
				}
			}
			return res
		}
	}
	return res
}

// useful reports whether an answer counts toward the majority after which
// a round stops waiting: for a join or a renewal, the server holds us (for
// a commit, committed with its token); for a leave or a withdraw, it
// answered. A round waits for every server until its outcome is decided
// either way (a majority useful, or too few left to make one), so that a
// slow server is never cut from a decision it could change (a commit that
// would have reached a majority).
func useful(mode string, commit uint64, r result) bool {
	switch {
	case r.err != nil:
		return false
	case mode == "leave" || mode == "withdraw":
		return true
	}
	return r.r.status == "held" && (commit == 0 || r.r.mine == commit)
}

// errStraggler is the answer of a server a round did not wait for.
var errStraggler = rediskit.Classify(context.DeadlineExceeded)

// stragglerGrace is the least a round waits for the servers that have
// not answered once a majority has (see round).
const stragglerGrace = 25 * time.Millisecond

// onEach runs f on every server at once and returns each server's error,
// classified and named by its server (nil where f succeeded).
func (e *Elector) onEach(f func(i int, c redis.UniversalClient) error) []error {
	errs := make([]error, len(e.cfg.Servers))
	fanOut(len(errs), func(i int) {
		if err := f(i, e.cfg.Servers[i].Client); err != nil {
			errs[i] = fmt.Errorf("%s: %w", e.cfg.Servers[i].Addr, rediskit.Classify(err))
		}
	})
	return errs
}

// fanOut runs f(0..n-1) in parallel and returns when all have.
func fanOut(n int, f func(i int)) {
	var wg sync.WaitGroup
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f(i)
		}()
	}
	wg.Wait()
}

// leave removes entry from every server. It retries a server's transient
// errors until ctx ends, but returns as soon as a majority has removed it
// and every other server was asked once: the entry left behind on a
// server that did not answer expires there after one TTL, and no majority
// can be formed without a server that removed it. It fails if no majority
// removed it.
//
// handover, if not 0, is the leaver's token + 1: each server where the
// leaver still holds the term committed grants it, committed with that
// token, to its next in line (see stepScript), or, for a switchover (to
// not empty), to candidate to if it is live there. handed counts the
// servers that answered that they granted it to one entry of candidate to
// (the entry most of them named: a server may know only an older entry of
// that candidate), passed those that granted it to the next in line
// because candidate to was not live there.
func (e *Elector) leave(ctx context.Context, op, entry string, handover uint64, to string) (handed, passed int, err error) {
	pending := make([]bool, len(e.cfg.Servers))
	for i := range pending {
		pending[i] = true
	}
	removed := 0
	byEntry := map[string]int{} // servers that handed the term over, by entry
	b := e.core.NewBackoff()
	for {
		var errs []error
		for i, r := range e.round(ctx, pending, op, "leave", entry, to, handover, e.cfg.Clock.Now(), false) {
			if !pending[i] {
				continue
			}
			if r.err == nil {
				pending[i] = false
				removed++
				switch r.r.status {
				case "handed":
					byEntry[r.r.head]++
					handed = max(handed, byEntry[r.r.head])
				case "passed":
					passed++
				}
				continue
			}
			errs = append(errs, fmt.Errorf("%s: %w", e.cfg.Servers[i].Addr, r.err))
			if rediskit.IsPermanent(r.err) {
				pending[i] = false
			}
		}
		switch {
		case len(errs) == 0:
			return handed, passed, nil
		case removed >= e.m:
			e.log.Debug("candidate left a majority; it expires on the others", "entry", entry, "err", errors.Join(errs...))
			return handed, passed, nil
		}
		left := 0
		for _, p := range pending {
			if p {
				left++
			}
		}
		if left == 0 || !e.core.Sleep(ctx, b.Next()) {
			return handed, passed, &elector.StoreError{Op: op, Err: fmt.Errorf("remove candidate %s from a majority (%d of %d did): %w", entry, removed, len(pending), errors.Join(errs...))}
		}
	}
}

// cleanup removes entry after a term or campaign ended, within a short
// bound and independently of any context that has ended.
func (e *Elector) cleanup(entry string, handover uint64) {
	e.core.Cleanup(entry, func(ctx context.Context) error {
		_, _, err := e.leave(ctx, "leave", entry, handover, "")
		return err
	}, "could not remove candidate from every server; it expires there after one ttl")
}

// request bounds one request to server i: by its patience, which starts
// at callTimeout.
func (e *Elector) request(ctx context.Context, i int) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, e.patience[i].Timeout())
}
