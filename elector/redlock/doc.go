// Package redlock is electd's Redlock backend: an elector.Elector kept by
// a quorum of N independent Redis servers (not replicas of one another, not
// a cluster), through github.com/redis/go-redis/v9. A term is held while a
// majority m = ⌊N/2⌋ + 1 of the servers hold this candidate's committed
// entry. It tolerates the loss, restart or partition of any minority.
//
// What is where: this package keeps only what is Redlock's own: the rounds
// over N servers (round, leave), the quorum lease rule (quorum.go), the
// commit of a token and the handover (stepScript, campaign.go), and the
// quorum's view, status, switchover and run record. The lifecycle, the
// campaign's waits, the subscriptions, the bus's listeners and the Lua both
// backends share are elector/internal/rediscore's, written once with the
// single-server backend (elector/redis); so is the description of what
// both do alike (requests and their patience, store errors, messages and
// wake-ups, the leader view, the epoch rule, the run record), which this
// documentation does not repeat.
//
// # Algorithm
//
// Each server keeps its own copy of the election, changed only by one Lua
// script (stepScript), atomically: a queue of entries scored by the
// candidate's order (the start of its campaign in microseconds of its own
// clock, the same on every server, so that the queues agree), a lease per
// entry computed on that server's own clock (TIME + TTL), and a term: the
// entry it is granted to, and the fencing token that grant is committed
// with ("" until committed). A candidate sends every step to all servers
// at once, each with its own send time. A round waits for every server
// until its outcome is decided (a majority held, or too few can), then a
// short grace (as long again, at least 25 ms) for the rest: a server that
// does not answer at all (black-holed) costs a round that grace, not the
// request's timeout (rediskit.Patience, per server); its answer counts as
// failed.
//
// A server grants its term to the first entry of its queue that claims
// (a candidate claims while its last round reached a majority, so that
// one cut off from a majority holds no grant that others need), when
// nobody holds it and its state is older than one TTL. A candidate granted
// by a majority commits its token to them in a second round; the term
// starts once a majority acknowledged that commit. An uncommitted grant
// yields to the first claiming entry, so a split vote (each of several
// candidates granted some servers, none a majority) resolves in the
// queues' common order at the next round; a candidate that holds grants
// while others hold uncommitted ones elsewhere withdraws its own and
// retries after a growing, jittered pause. A committed grant lasts until
// its lease lapses on that server or its holder leaves. The entry the
// server's last token was committed to takes the server back, when its
// lease there lapsed (a partition longer than a TTL), before any other
// entry; otherwise a long-lived leader would lose a server at every such
// outage, and its fault tolerance with it.
//
// # The lease rule
//
// quorum.go. Server s, having acknowledged a renewal of a committed entry
// sent at t_s, grants nobody else before t_s + TTL by its own clock (it
// received the renewal after t_s, and measures from then), so it
// guarantees the local deadline d_s = t_s + TTL·(1 − drift) − ε. Another
// candidate needs a majority of all N servers: while m of them still hold
// a d_s in the future it cannot have one, since N − m < m. So the term's
// deadline is the m-th latest d_s — Window after the m-th latest of the
// acknowledged send times — and there is no term while fewer than m
// acknowledged. A server that does not answer keeps the d_s of its last
// acknowledgement (the lease runs on there); fewer than N servers granted
// only leaves fewer candidates for the order statistic, and with fewer
// than m there is no deadline at all. A server that answers that it no
// longer holds the entry keeps its d_s too: it can only say so once that
// lease expired on it (d_s has passed, given the drift bound) or after it
// lost its state, and then it grants nothing for one TTL (below), past
// d_s. (The one request that drops a live committed grant, a withdraw of
// the token it is committed with, is sent only for tokens the candidacy
// never leads with; see "Fencing tokens".) So the deadline only moves
// forward; once fewer than m servers can still hold the entry, the term
// ends at once (ErrLeaseLost). Each server is renewed every RenewInterval
// after its last acknowledged renewal, and one that failed is retried
// after a short backoff on its own; no store error ends a term, only the
// deadline or the servers' word.
//
// With N even the rule is conservative: another candidate would need
// m servers, so N − m + 1 of ours would have to lapse, and the m-th latest
// d_s is never later than that.
//
// # Fencing tokens
//
// A token is max(the highest token any server of the granting round knows,
// the highest this Elector has seen, the highest this candidacy committed
// or withdrew) + 1, where each server floors what it knows by its own
// clock in microseconds. It is committed to a majority before the term
// starts, and every server raises its token key to every token committed
// there. Majorities intersect: the granting round of any later term
// includes a server of this term's majority, whose grant came after this
// term's commit there (the term held that server until then), so the
// later token is greater. A server that lost its state since (a
// restart without persistence) grants nothing for one TTL, and then its
// floor, its clock in µs, is past every token granted before the loss
// provided the servers' clocks agree within one TTL. A server refuses a
// commit, or a handover, whose token is not above every token committed
// there before (the committed key): a late request never lowers a token.
//
// A withdraw of token X (a commit of X that reached no majority, or a
// handover of X that reached a minority while another leads) drops the
// candidacy's grant wherever it is committed with X, whenever it lands, and
// one held back by the network may land long after the candidacy moved on.
// So a candidacy never leads with a token it committed or withdrew, by
// adoption (below) or by a commit: it never computes a token at or below
// the highest of them. (A failed commit's token is known to no server that
// the commit missed; without the rule, a server whose clock is ahead made
// the next attempt compute the same token, and the late withdraw of the
// first attempt ended the second's grant: two valid terms, issue 24.)
//
// # Handover
//
// A leader that resigns (or whose term ended) leaves every server with a
// handover token, its own + 1: each server where it still holds the term
// committed grants it, committed with that token, to the first claiming
// entry. That candidate, woken by the server's message, finds a majority
// holding its entry committed with one token and takes the term as it
// stands, without a commit round, unless the candidacy committed or
// withdrew that token itself: then it commits a greater one over it. A
// handover that reached a minority is overwritten by the successor's own
// commit of a greater token; a candidate holding grants committed to it
// that make no majority, while a majority names another leader, withdraws
// them, and never adopts that token afterwards, even once the handover has
// reached a majority (the withdraw may still be in flight: issue 24).
//
// Observers see a handover land server by server. While neither the leaver
// nor the successor is named by a majority (the leaver held fewer than all N
// servers, or the successor withdrew part of the handover) they see no
// leader. Each server's word reaches an observer in that server's own
// messages, some later than others, so around a change an observer may also
// see no leader for a moment while a majority still names one, and then that
// leader again. A successor that withdrew the handover token is seen with it
// once the rest of the handover has reached a majority (and, as the handover
// and the withdraw land on different servers, may cease to be and be again),
// then with the token it commits over it: one ID with two tokens, the first
// one that no term leads with.
//
// A switchover (Term.ResignTo, switchover.go) is the same leave naming
// the target: each server hands the term to the target's newest live
// claiming entry there (an older one of the same ID is a crashed copy's,
// lapsing), or, where the target is not live, to the first claiming entry
// as ever. ResignTo returns nil only if a majority of the servers handed
// it to the target, a *elector.NotQueuedError if a majority handed it to
// the head or none found the target, and otherwise a StoreError: the
// handover split (the target on some servers, the head on others, the
// leaver's lapsing term on the servers the leave missed), and nobody may
// lead until that term lapses, up to one TTL; then whoever wins leads. A
// check before the leave cannot rule that out (the target may lapse on a
// server, and the leaver lose another, after it): the split is reported,
// not prevented (TestSwitchoverSplitHandover).
//
// A term that the servers' answers end early (fewer than m can still hold
// it: ErrLeaseLost) keeps the leases its renewals earned; the Elector
// leaves, and hands over, only once that earned deadline has passed, or
// at Resign (which the supervisor calls once the child is gone), so that
// no successor starts while the child is still being stopped.
//
// # Lost state
//
// Each server keeps the epoch rule both backends share (see rediscore:
// a server that may have lost writes grants nothing for one TTL). Unlike
// a single server, a server of a quorum does not take a name its record
// does not know for new: it may have missed the election's beginning (its
// candidates could not reach it) without losing anything, and granting
// the name at once there would let one other server whose state went back
// under the same run (a restored snapshot, which no epoch rule sees) make
// a quorum for a second term. So a fresh election name waits one TTL on
// Redlock, as before the server record. A leader's entry is taken back by the restarted server at its next
// renewal, and granted to it again (committed with its token) once the
// epoch is over, if it is first in line ("extend or lock").
//
// # No polling, no herd
//
// As on a single server (see rediscore), with a quorum's differences: a
// step that changes a server's term or its first claiming entry publishes
// it; a waiter re-runs only for a message naming itself, from any server,
// that another's step published (its own step's reply already told it
// what the message says), and otherwise sleeps until its next renewal or
// until the moment a majority of servers may let it hold (the m-th
// earliest of the servers' answers). An idle waiter costs one script call
// per server per RenewInterval.
//
// # Locks
//
// TryCampaign joins, and leaves again with elector.ErrBusy unless a
// majority grants it, or grants or only waits out its first TTL. RecordRun
// sets the record (see rediscore) on every server and succeeds once a
// majority has it; LastRun asks every server, needs a majority's answers,
// and returns the newest record any of them has, so a record survives the
// loss of any minority; it writes that record back (SET NX, for what is
// left of its period) to the servers that answered without it, and a
// leader writes the record it made back to a server that takes its term
// back after losing it, so a rolling restart of servers without
// persistence, one at a time, keeps it. A restart of a majority at once
// loses it, as a restart of a single Redis does. ForgetRun deletes the
// record on every server and succeeds once a majority has; a server it
// missed may bring the record back through that read repair (a skip until
// it lapses, never a second run).
//
// # No semaphores
//
// Slots > 1 is refused (a *elector.ConfigError on "slots"): a semaphore
// over a quorum is not sound. With 3 servers and 2 slots, three holders
// can each hold a majority (a and b on one server, b and c on the next, a
// and c on the third).
//
// # Keys
//
// On every server, election NAME uses (all in the hash tag {NAME}):
//
//	electd:{NAME}:rl:queue     ZSET  entry → candidate's order
//	electd:{NAME}:rl:claims    ZSET  entry → order, the entries that claim
//	electd:{NAME}:rl:expiry    ZSET  entry → lease deadline (server µs)
//	electd:{NAME}:rl:cand      HASH  entry → "ID\nADDRESS"
//	electd:{NAME}:rl:term      HASH  entry, token ("" until committed), since
//	electd:{NAME}:rl:token     STRING highest token known here
//	electd:{NAME}:rl:committed STRING highest token committed here
//	electd:{NAME}:rl:born      HASH  at (server µs), run, why, last (server µs)
//	electd:{NAME}:rl:left      ZSET  entry → µs: left, refused for two TTLs
//	electd:{NAME}:rl:lastrun   STRING once-per-period run record (JSON), no TTL
//	electd:{NAME}:rl:events    pub/sub channel, in database 0
//	electd:{NAME}:rl:db<N>:events  pub/sub channel, in database N > 0
//
// and, once per database, the server record electd:server:db<N> (see
// rediscore), shared with the redis package's elections on that server.
//
// They are apart from the single-server backend's keys: every copy of an
// election must use the same store URL.
//
// # Guarantees
//
// At most one term is valid at any instant, and fencing tokens strictly
// increase, provided:
//
//   - fewer than a majority of the servers lose their state at once (a
//     minority may restart empty, be unreachable, or both);
//   - the rates of the candidates' clocks and of every server's clock
//     differ by less than Timing.Drift, and no server's wall clock is
//     stepped forward (TIME is the wall clock);
//   - for tokens across a state loss: the servers' wall clocks agree
//     within one TTL;
//   - every candidate uses the same TTL and the same servers, and nothing
//     else writes the electd:{NAME}:rl:* keys or electd:server:db<N>, or evicts
//     some of them (use a noeviction policy: the epoch rule sees a born
//     record or a server record that vanished, but not the term or an
//     entry evicted alone).
//
// # Non-guarantees
//
//   - FIFO order holds when every join reaches every server; a candidate
//     whose clock is behind queues earlier (fairness, not safety, rests on
//     the candidates' clocks), and one whose join missed a server queues
//     there only at its next step.
//   - A request delivered late (after its timeout, by a healed
//     connection) never re-queues an entry that left (a leave is recorded
//     for two TTLs), nor lowers a token (the committed key), nor ends a
//     term's grant early: a withdraw names a token its candidacy committed
//     or withdrew, and a candidacy never leads with such a token (it
//     neither adopts one nor computes one at or below the highest). One
//     that arrives later still, or on a server that restarted meanwhile,
//     may re-queue the entry there, which delays the next grant by up to
//     one TTL.
//   - A holder whose whole host pauses past its deadline may still write:
//     that is what fencing tokens are for.
package redlock
