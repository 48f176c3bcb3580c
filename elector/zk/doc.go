// Package zk is the ZooKeeper backend: zk://h1:2181,h2:2181[/chroot]
// (zks:// for the ensemble's TLS client port), with digest authentication
// from the URL's user:pass.
//
// # Election
//
// Each candidate creates an ephemeral sequential node under
// [chroot]/electd/elections/NAME/ (go-zookeeper's protected create, so that
// a create whose answer was lost is found again), holding its id, address
// and slot count. The first Slots nodes in sequence order hold; every other
// candidate watches only the Slots nodes just ahead of it (one, for a plain
// election), so a leader's exit wakes its successor alone and candidates
// are served in arrival order. A candidate whose slot count differs from
// the first other candidate's is refused (elector.SlotsError).
//
// The fencing token is the leader node's creation zxid (Czxid): zxids only
// grow across the ensemble's history (the epoch is in their high 32 bits),
// and a node created later has a greater one, so every term's token is
// greater than every earlier term's in that election, across ensemble
// restarts too. A holder writes its term's start into its node (Since).
//
// # Sessions and the deadline
//
// Every elector has a ZooKeeper session of its own (session.go). The
// ensemble expires a session once the NEGOTIATED session timeout passes
// with no packet from the client; the server clamps the timeout asked
// (--ttl) to 2..20 of its ticks. go-zookeeper keeps the negotiated value to
// itself, so the connection is wrapped (sniffer) and the handshake's answer
// read: every deadline and renewal interval runs on the negotiated timeout
// (the interval keeps its ratio to --ttl), a difference is logged, and a
// timeout that leaves no valid renewal interval under elector.Timing's rule
// is refused (a ConfigError naming ttl).
//
// The ensemble's LEADER decides when a session expires: the negotiated
// timeout after the last touch of the session it has processed (rounded up
// to a tick). A packet touches the session on the server the client is
// connected to; a follower passes its touches on to the leader only in its
// answers to the leader's pings (every tickTime/2), on the same stream as
// the requests it forwards. A read proves nothing: a follower cut off from
// its leader answers reads (and pings) from memory for up to
// syncLimit·tickTime while its touches no longer reach the leader. A Sync,
// or a write, must go through the leader, which processes it after every
// touch the follower relayed before forwarding it, and answers it only
// after its outstanding proposals (a session's close among them) commit
// (on a standalone server, or connected to the leader, a touch counts at
// once: the rule holds there too). One Sync can overtake a relay: when the
// leader→follower stream stalls, the follower has no ping to answer, the
// Sync goes ahead, and the held relay may never arrive. A write sent after
// the Sync's answer cannot: the leader answered the Sync lag after the
// touch reached the follower, so a ping it sent after the touch came first
// on that stream and the follower relayed the touch before it passed the
// answer on; and a write is checked against the session and committed on
// a quorum, which an old leader that lost its followers (it serves on for
// syncLimit ticks while the others elect another) cannot do (term.go,
// relayed; the write goes to the election's renewals node,
// [chroot]/electd/renewals/NAME, which nobody watches). A packet's SEND time
// does not say when it reached the follower (a stalled link delivers a
// packet and a later Sync together, and the follower forwards the Sync
// before its next ping answer relays the packet's touch); the ANSWER to a
// request of ours does: the follower had the request by then. Hence the
// rule (term.go, prove and lead; evidence.go):
//
//	ValidUntil = s_P + negotiated timeout·(1−drift) − ε
//
// where s_P is the send time (this host's clock, taken before the call)
// of the latest request of ours whose answer was read (the time taken as
// soon as the call returns) at least lag before a Sync or write that
// completed was sent, and a write sent after its answer completed too, on
// the SAME TCP connection, with no reconnection between: the first Sync
// (or write) reaches the follower at least lag after the request did,
// whatever the latency. Every request of the session's client is
// timed so (session.go, start), on the elector's clock, per connection,
// but the digest authentication (a server answers it without touching the
// session); a reconnection starts afresh. lag is half a tick (the leader's ping
// period) plus a margin of a quarter tick and 20ms (the ping period's
// jitter). Servers do not tell clients their tick: each elector asks
// once, before it opens its first session, on a throwaway connection, for
// a session of 1ms, which the server raises to its minSessionTimeout (2
// ticks by default): the tick is taken as half that, and never more than
// half the negotiated timeout (a timeout is at least 2 ticks; that bound
// alone when the probe fails).
//
// A renewal (RenewInterval less lag after the previous one, term.go keep
// and prove) sends a read of the leader's node (the touch), waits until lag
// has passed since its answer, then Syncs the node twice, the second time
// with a read of it alongside (the previous renewal's requests vouch too, but they are an
// interval old: a deadline counted from them leaves no room for a late
// renewal; only on a link whose round trip exceeds the interval less lag
// are they the evidence, a renewal then Syncing an interval after the
// last); on success ValidUntil moves by the rule
// (elector.Deadline.Renewed), and the read says whether the node is still
// there. A term starts on the write of its start (Since) into the node:
// the latest request answered lag before the write was sent gives the
// first deadline when that leaves as much as a renewal leaves (the window
// less an interval, and room for a missed renewal: a supervisor's stop
// timeout counts on it), once a Sync after the write's answer completed,
// else a proof like a renewal's follows (lag after the write's answer, two
// Syncs and a read). Timing.Lag carries lag to the supervisor, whose stop
// budget leaves room for it. So that a handover does not wait lag, the
// candidate next in line (each of the first Slots waiters) reads its own
// node every (RenewInterval − lag)/2 while it waits (campaign.go,
// warmEvery): when woken, such a read answered lag before its write is
// younger than a renewal interval, and its term starts on it.
//
// A session keeps the least timeout its handshakes answered; and since a
// member applies the timeout it grants as soon as it has the handshake (it
// may move the session's expiry EARLIER, if its maxSessionTimeout is
// lower), before the client reads the answer, a reconnection of a session
// that holds first asks the member, on a throwaway connection, what it
// grants: one that grants less ends the session's terms before the
// handshake goes out, and one that does not answer is not dialled. A
// handshake must be answered within the session timeout asked (a member
// not yet in its quorum accepts connections and answers nothing).
//
// A term ends (Done closes) at the earliest of: that deadline, the
// session's expiry (the client's StateExpired), its node's deletion (a
// watch, or a renewal that finds it gone), Resign, Close. A request that
// fails does not end a term the deadline still covers. However a term
// ends, its node is deleted; when it cannot be (the ensemble is
// unreachable), the session is closed and the node goes with it (at once,
// or when the ensemble expires the session). A campaign that fails or is
// cancelled does the same, and one cancelled while its create is in
// flight closes its session. After an expiry the client opens a new
// session and a campaign starts again from scratch: no node of an earlier
// session is trusted.
//
// # What is and is not guaranteed
//
//   - No overlap, by the deadline rule, as long as this host's clock and
//     the ensemble's leader's run at rates within Drift of each other and
//     the process is not paused: a pause longer than the remaining window
//     (a stopped process, a suspended VM) lets ZooKeeper expire the session
//     and grant the next candidate while the paused leader still believes
//     it leads; it finds out only when it runs again (Done closes at once
//     then, for the deadline has passed), and Term.Suspended tells of host
//     suspension. The fencing token is what protects a resource against
//     such a late writer: a resource that refuses tokens lower than the
//     highest it has seen refuses the old leader.
//   - The rule assumes that no server's minSessionTimeout is set below
//     2·tickTime (else the probe's tick is too small), that the servers
//     share their tickTime and grant the same session timeouts (min and
//     maxSessionTimeout: lower --ttl before any member's
//     maxSessionTimeout), that nothing between electd and the ensemble
//     sends a connection to another member than the one dialled, or holds
//     it (a load balancer in front of members that disagree defeats the
//     reconnection's check: session_reconnect_test.go shows it), and that the ensemble's leader sends its pings
//     on time: a leader paused longer than the margin is like a paused
//     process; and that electd's sessions connect to voting members, not
//     to observers (an observer that follows an observer master relays
//     touches over two hops, which the rule does not cover:
//     term_sync2_test.go shows it). With those, a follower cut off from
//     its leader, which still answers reads, cannot stretch a term: its
//     Syncs fail.
//   - Left open, in microseconds: a follower records a touch by reading
//     its touch table and writing it back, and a ping answer that swaps
//     the table between the two loses the touch (the Sync's own touch
//     usually makes up for it).
//   - A renewal costs lag, three round trips (the touch, the Sync, the
//     write) and a write the ensemble commits (one per renewal interval
//     per leader): a link whose round trip is a large part of the window
//     loses terms (renewals then miss), never safety. The election's
//     renewals node (persistent, empty) stays after its last candidate.
//   - Switchover (Term.ResignTo, plain elections only) goes through a
//     handover node (switchover.go): the candidates it passes queue again
//     behind its target, in the order they notice, and every waiter is
//     woken once by it.
//   - The run record (--once-per) is a persistent node beside the line
//     (NAME/run) that lapses by the recording host's clock: ZooKeeper's TTL
//     nodes need a server setting electd does not ask for.
//   - Status (Queue) shows the line with each node's creation time and
//     token; ZooKeeper does not say when a session expires (Expires zero).
//
// Files: backend.go (the URL, Dial, the store's Conn, errors), session.go
// (one elector's client, the negotiated timeout, its sessions, the timing
// of every request), servers.go (the order the client tries servers in), evidence.go (the send and answer times of our
// requests per connection, lag, the tick's probe), elector.go (Elector,
// nodes, Leader), campaign.go (the queue), term.go (the deadline and its
// renewals), switchover.go (the handover node and the line's floor),
// observe.go, lock.go (run records), status.go.
package zk
