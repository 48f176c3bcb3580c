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
// go-zookeeper sends its own pings but does not say when one was sent and
// answered, so they count for nothing. The leader reads its own node every
// renewal interval (term.go, keep), taking the send time before the
// request; an answer that the node exists proves the session alive when the
// server read it, so ValidUntil becomes that send time plus the negotiated
// timeout·(1−drift) − ε (elector.Timing.DeadlineAfter, the rule every
// backend applies). The term starts on the listing that showed the node
// first, by that listing's send time.
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
//   - A renewal is a read, answered by whichever server the client is
//     connected to. A follower cut off from the ensemble's leader, while
//     this client still reaches it, answers reads for up to
//     syncLimit·tickTime before it drops its clients, and its touches of
//     the session no longer reach the leader: in that window a renewal can
//     count although the leader expires the session on its own, earlier,
//     reading. electd does not subtract that bound (it does not know the
//     servers' settings): this partition of a follower from its leader is
//     the case the deadline rule does not cover; the fencing token does.
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
// (one elector's client, the negotiated timeout, its sessions), elector.go
// (Elector, nodes, Leader), campaign.go (the queue), term.go (the deadline
// and its renewals), switchover.go (the handover node and the line's
// floor), observe.go, lock.go (run records), status.go.
package zk
