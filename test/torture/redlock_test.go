package torture

import (
	"context"
	"fmt"
	"math/rand/v2"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/faultproxy"
	"github.com/electd/electd/internal/testenv"
)

// quorum is the store's Redlock quorum (its own faults').
func (c *cluster) quorum() *testenv.Redlock { return topology[*testenv.Redlock](c) }

// quorumAdmin is the harness's own client of each server of the quorum,
// in its order, made at the first call and closed when the test ends.
func (c *cluster) quorumAdmin() []*redis.Client {
	if c.rlAdmin == nil {
		for _, a := range c.quorum().Addrs() {
			cli := redis.NewClient(&redis.Options{Addr: a, MaxRetries: -1, PoolSize: 2,
				DialTimeout: 500 * time.Millisecond, ReadTimeout: 500 * time.Millisecond, WriteTimeout: 500 * time.Millisecond})
			c.t.Cleanup(func() { _ = cli.Close() })
			c.rlAdmin = append(c.rlAdmin, cli)
		}
	}
	return c.rlAdmin
}

// aboutQuorum says, for the figures, what the quorum is and how the nodes
// reach its servers.
func (c *cluster) aboutQuorum() string {
	rl := c.quorum()
	return fmt.Sprintf("a quorum of %d independent redis-servers (a term needs %d), without persistence: a restarted one comes back empty; "+
		"every node reaches each server through a fault proxy of its own, so cut-leader, slow-leader and reset-leader act on all of them, "+
		"partition-majority and partition-minority on some", rl.Len(), rl.Majority())
}

// injectQuorum applies and heals one of a Redlock quorum's own faults. The
// servers are independent redis-servers without persistence: one that
// comes back is empty, and grants nothing for one TTL (its new epoch).
// A term needs a majority of them: a fault that leaves the leader a
// majority should leave its term alone (the figures count how often a new
// term followed), one that takes it away must end the term before any
// other can begin (the record's checks), and tokens must grow even when a
// majority of the servers forgot them (the rolling restart).
func (c *cluster) injectQuorum(f *fault, rng *rand.Rand, lead *node) {
	t, rl, ttl := c.t, c.quorum(), c.cfg.ttl
	n, m := rl.Len(), rl.Majority()
	switch f.kind {
	case serverKill:
		i, d := rng.IntN(n), between(rng, ttl, 0.5, 2.5)
		f.target, f.note = "", fmt.Sprintf("s%d %s down %s", i, rl.Server(i).Addr(), d)
		f.at = time.Now()
		rl.Kill(t, i)
		time.Sleep(d) // the fault's length is the experiment
		rl.Start(t, i)
		f.healed = time.Now()
		c.awaitWhole(f)

	case minorityRestart:
		some := pick(rng, n, n-m)
		f.target, f.note = "", "restarted empty at once: "+c.servers(some)
		f.at = time.Now()
		for _, i := range some {
			rl.Kill(t, i)
		}
		for _, i := range some {
			rl.Start(t, i)
		}
		f.healed = time.Now()
		c.awaitWhole(f)

	case rollingRestart:
		order := rng.Perm(n)
		gaps := make([]time.Duration, n-1)
		for k := range gaps {
			gaps[k] = between(rng, ttl, 0.2, 1)
		}
		f.target = ""
		f.note = "restarted empty in turn: " + c.servers(order)
		if len(gaps) > 0 {
			f.note += fmt.Sprintf(", %s apart", joinDurations(gaps))
		}
		f.at = time.Now()
		for k, i := range order {
			if k > 0 {
				time.Sleep(gaps[k-1]) // the gap is the experiment
			}
			rl.Restart(t, i)
		}
		f.healed = time.Now()
		c.awaitWhole(f)

	case partitionMajority, partitionMinority:
		k, lo, hi := m, 1.5, 2.5
		if f.kind == partitionMinority {
			k = n - m
		}
		cut := pick(rng, n, k)
		var pxs []*faultproxy.Proxy
		for _, i := range cut {
			pxs = append(pxs, lead.proxies[i])
		}
		d, reset := between(rng, ttl, lo, hi), rng.IntN(2) == 0
		f.note = fmt.Sprintf("cut from %s for %s, still reaching %s", c.servers(cut), d, c.servers(others(n, cut)))
		// Cut just after the servers to be cut answered: the tightest case.
		c.awaitReplyFrom(pxs)
		f.at = time.Now()
		for _, px := range pxs {
			px.Cut()
		}
		if f.kind == partitionMajority {
			// Every renewal a majority acknowledged was sent before now: the
			// term's deadline is the majority-th latest acknowledgement.
			f.lost = time.Now()
		}
		time.Sleep(d) // the partition's length is the experiment
		for _, px := range pxs {
			px.Heal()
			if reset {
				px.Reset()
			}
		}
		if reset {
			f.note += ", then reset"
		}
		f.healed = time.Now()

	case slowServer:
		i := rng.IntN(n)
		delay, d := between(rng, c.cfg.renew, 1.2, 2.5), between(rng, ttl, 1.5, 2.5)
		f.target = ""
		f.note = fmt.Sprintf("every link to s%d delayed %s each way (renew every %s) for %s", i, delay, c.cfg.renew, d)
		f.at = time.Now()
		for _, nd := range c.nodes {
			nd.proxies[i].SetDelay(delay)
		}
		time.Sleep(d) // the fault's length is the experiment
		for _, nd := range c.nodes {
			nd.proxies[i].SetDelay(0)
		}
		f.healed = time.Now()

	case lateRequest:
		c.injectLate(f, rng, lead)

	case pauseServer:
		i, d := rng.IntN(n), between(rng, ttl, 0.5, 2.5)
		pid := rl.Server(i).Pid()
		f.target, f.note = "", fmt.Sprintf("s%d paused %s", i, d)
		f.at = time.Now()
		c.must(syscall.Kill(pid, syscall.SIGSTOP))
		time.Sleep(d) // the pause's length is the experiment
		c.must(syscall.Kill(pid, syscall.SIGCONT))
		f.healed = time.Now()
	}
}

// injectLate holds back requests and delivers them after their rounds
// moved on: each node's link to one server, drawn at random (or none), is
// cut for 1.2–3 renew intervals (a request's timeout is one interval, so
// the client gives up on what it wrote, and the round goes on without that
// server), and healed without a reset, so that everything written
// meanwhile lands late, in order. Half of the time the leader resigns as
// the hold begins: its leave lands on some servers before others, and the
// successor's joins, withdraws and commits are held back on some of them
// (the late withdraw of issue 24). A late request must not end a term
// early, re-queue an entry that left, or lower a token.
func (c *cluster) injectLate(f *fault, rng *rand.Rand, lead *node) {
	n := c.quorum().Len()
	d, handover := between(rng, c.cfg.renew, 1.2, 3), rng.IntN(2) == 0
	var held []*faultproxy.Proxy
	var links []string
	for _, nd := range c.up() {
		if i := rng.IntN(n + 1); i < n {
			held = append(held, nd.proxies[i])
			links = append(links, fmt.Sprintf("%s→s%d", nd.id, i))
		}
	}
	f.target = ""
	f.note = fmt.Sprintf("held %s for %s", strings.Join(links, ", "), d)
	if len(links) == 0 {
		f.note = "held nothing"
	}
	f.at = time.Now()
	for _, px := range held {
		px.Cut()
	}
	if handover {
		f.target = lead.id
		f.note += ", the leader resigned"
		c.resign(f, lead)
	}
	time.Sleep(time.Until(f.at.Add(d))) // the hold's length is the experiment
	for _, px := range held {
		px.Heal() // no reset: what was written lands now
	}
	f.healed = time.Now()
}

// wholeBound bounds awaitWhole after the heal: the restarted servers'
// epoch (one TTL), an election if the term was lost, the leader's next
// renewal, and the recovery bound for a loaded machine.
func (c *cluster) wholeBound() time.Duration { return 2*c.cfg.ttl + c.cfg.recoveryBound }

// awaitWhole, after servers came back empty, waits until the quorum is
// whole again: every server holds one committed term, the same entry with
// the same token, whose lease there is live. A restarted server grants
// nothing for one TTL (its new epoch) and then takes the leader's next
// renewal; until then the term rests on fewer servers, and another fault
// would meet a quorum that is short of them. The time from the heal is a
// figure; not whole within wholeBound is noted (a liveness matter, not a
// safety one: the record's checks decide that), and the run goes on.
func (c *cluster) awaitWhole(f *fault) {
	deadline := f.healed.Add(c.wholeBound())
	var status string
	for {
		ok, st := c.whole()
		if ok {
			f.whole = time.Since(f.healed)
			return
		}
		status = st
		if time.Now().After(deadline) {
			f.note += fmt.Sprintf("; quorum not whole %s after the heal: %s", c.wholeBound(), status)
			return
		}
		time.Sleep(settlePoll) // polling a condition with a deadline
	}
}

// whole reports whether every server of the quorum holds the same live,
// committed term (see awaitWhole), and what each holds.
func (c *cluster) whole() (bool, string) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	prefix := "electd:{" + c.election + "}:rl:"
	var first string
	var says []string
	ok := true
	for i, cli := range c.quorumAdmin() {
		held, err := termScript.Run(ctx, cli, []string{prefix + "term", prefix + "expiry"}).StringSlice()
		switch {
		case err != nil:
			says, ok = append(says, fmt.Sprintf("s%d: %v", i, err)), false
		case len(held) != 2 || held[1] == "":
			says, ok = append(says, fmt.Sprintf("s%d: no committed term", i)), false
		default:
			says = append(says, fmt.Sprintf("s%d: %s token %s", i, held[0], held[1]))
			if i == 0 {
				first = held[0] + " " + held[1]
			} else if held[0]+" "+held[1] != first {
				ok = false
			}
		}
	}
	return ok, strings.Join(says, "; ")
}

// termScript reads one server's term holder, entry and token, if its
// lease there is live by the server's clock: {entry, token} or {} (KEYS:
// term, expiry).
var termScript = redis.NewScript(`
local t = redis.call('HMGET', KEYS[1], 'entry', 'token')
if not t[1] or not t[2] or t[2] == '' then return {} end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local d = tonumber(redis.call('ZSCORE', KEYS[2], t[1]) or '0')
if d <= now then return {} end
return {t[1], t[2]}
`)

// pick draws k distinct indices of n, in ascending order.
func pick(rng *rand.Rand, n, k int) []int {
	out := slices.Clone(rng.Perm(n)[:k])
	slices.Sort(out)
	return out
}

// others are the indices of n not in some.
func others(n int, some []int) []int {
	var out []int
	for i := range n {
		if !slices.Contains(some, i) {
			out = append(out, i)
		}
	}
	return out
}

// servers names the quorum's servers at the indices is: "s0, s2".
func (c *cluster) servers(is []int) string {
	var names []string
	for _, i := range is {
		names = append(names, fmt.Sprintf("s%d", i))
	}
	return strings.Join(names, ", ")
}

func joinDurations(ds []time.Duration) string {
	var s []string
	for _, d := range ds {
		s = append(s, d.String())
	}
	return strings.Join(s, ", ")
}
