// Package torture attacks a cluster of real electd processes on real stores
// with randomly interleaved faults and proves, from the children's own
// record, that electd kept its promise: at most one child ran at any
// instant.
//
// TestTorture builds electd and test/recorder, and for each backend (etcd,
// Redis, Redis Sentinel, Redis Cluster, a three-member etcd cluster, a
// Redlock quorum of three independent redis-servers, a standalone
// ZooKeeper server and a three-server ZooKeeper ensemble, in
// parallel as far as
// -test.parallel allows: GOMAXPROCS, so two at a time on two cores) starts
// the store as its own processes (internal/testenv), N electd processes
// (default 5) that each reach the store through their own
// internal/faultproxy (a topology: directly, see below), and lets every
// child append to one shared record log (test/record). The children are a mix (n1, n4:
// one process; n2, n5: a main process that starts three workers, one in its
// process group, one setsid, one double-forked daemon, RECORD_WORKERS=1;
// n3: the same with workers that ignore SIGTERM): a child is its whole
// process tree, and every worker writes under its term's token. electd
// runs with its default containment (pidns as root), which every copy
// reports in /healthz and the figures name. It then injects faults, drawn
// by a seeded generator (the seed is printed; -torture.seed replays the
// schedule, though not the exact timing):
//
//	sigterm-electd   SIGTERM to the leader's electd (it must exit 0)
//	kill9-electd     kill -9 of the leader's electd (its child must die within 1 s;
//	                 a leader whose child has workers is chosen only where the
//	                 containment kills the tree with electd: pidns, userns)
//	kill9-child      kill -9 of the leader's child (one without workers)
//	kill9-main       kill -9 of the main process of the leader's child while its
//	                 workers run (as an OOM kill would)
//	resign           POST /resign to the leader
//	cut-follower     black-hole one follower's store link for 0.5–1.5 TTL
//	cut-leader       black-hole the leader's store link for 1.5–2.5 TTL
//	slow-leader      delay the leader's store link by 1.2–2.5 renew intervals each way
//	reset-leader     RST every connection between the leader and the store
//	sigstop-leader   SIGSTOP the leader's electd and child (its group and every
//	                 worker) for 1.5–2.5 TTL, then SIGCONT
//	store-restart    kill -9 the store, start it again after 0–1.5 TTL
//	                 (etcd and ZooKeeper on their data, Redis empty)
//	restart-node     start a candidate that died again (forced when fewer
//	                 than max(2, N−2) are up)
//
// The topologies (redis+sentinel: one master, three replicas, three
// sentinels with parallel-syncs 1; redis+cluster: three masters with a replica each;
// etcd-cluster: three etcd members, whose peer traffic runs through a fault
// proxy per directed link) cannot be proxied: a Sentinel or Cluster client
// dials the nodes it is told of, past any proxy, and an etcd client holds a
// connection to each member. There every node uses the topology's URL
// directly, with a kit.Link of its own: cut-follower and cut-leader
// black-hole it with an nftables rule on that node's sockets (matched by a
// group id of its own), and the faults a kernel filter cannot make
// (slow-leader, reset-leader) are not drawn; store-restart kills -9 every
// data node (the sentinels stay up) and starts them again, empty, or every
// etcd member, which come back with their data. Each topology adds its own
// faults, drawn only on it:
//
//	master-kill           Sentinel: kill -9 the master, wait until the sentinels
//	                      have promoted a replica that takes writes, start the old
//	                      master again (empty, as a replica of the new one)
//	master-sigstop        Sentinel: SIGSTOP the master until the sentinels have
//	                      failed over and the other replicas follow the new master,
//	                      then SIGCONT: it resumes as a master with its old data
//	                      until the sentinels demote it (waited for). Resuming it
//	                      while a replica still follows it is the split brain the
//	                      Redis backend did not cover before its sentinels
//	                      confirmed each step (WAIT 1 would still succeed there),
//	                      and the harness still does not
//	planned-failover      Sentinel (issue 24): SENTINEL FAILOVER, sent to a sentinel
//	                      drawn at random, while every full resync waits 1–2 s
//	                      (repl-diskless-sync-delay): with parallel-syncs 1 the old
//	                      master keeps a replica, which answers WAIT there, while
//	                      the sentinels already name the promoted one; healed once
//	                      every replica follows the new master and the sentinels
//	                      have demoted the old one (waited for)
//	slot-failover         Cluster: kill -9 the master of the election's slot, wait
//	                      until its replica owns the slot and takes writes, start
//	                      the killed node again (empty, as the new master's replica)
//	slot-manual-failover  Cluster: CLUSTER FAILOVER on a replica of the slot's master
//	reshard               Cluster: move the election's slot to another master, with
//	                      a pause of 0.5–1.5 TTL mid-migration (the slot MIGRATING
//	                      and IMPORTING, about half its keys moved) while electd runs
//	misconf               both: the master holding the election's keys refuses
//	                      writes with MISCONF for 0.3–0.8 TTL (its snapshot fails: a
//	                      directory stands where the dump file goes), then a snapshot
//	                      succeeds again. Its PING fails too, so the sentinels may
//	                      fail over if it lasts about down-after from their last reply
//	oom                   both: the same master's maxmemory is 1 (noeviction) for
//	                      0.3–0.8 TTL: writes refused with OOM
//	kill-raft-leader      etcd-cluster: kill -9 the raft leader member, wait until
//	                      the other two follow a new leader, start it again 0–1.5
//	                      TTL after the kill (on its data dir)
//	kill-raft-follower    etcd-cluster: the same for a follower (no election)
//	partition-raft-leader etcd-cluster: cut the raft leader member off from both
//	                      peers, both ways (clients still reach it), for 0.5–2.5
//	                      TTL; the others elect a new leader meanwhile if it lasts
//	partition-raft-follower etcd-cluster: the same for a follower
//	slow-member           etcd-cluster: delay every peer link of one member (the
//	                      raft leader a third of the time) by 0.25–2 renew
//	                      intervals each way for 1.5–2.5 TTL: below the election
//	                      timeout (500 ms) commits through the leader slow down,
//	                      above it the others hear nothing for that long at the
//	                      onset and may elect another leader
//	pinned-partition-raft-leader
//	                      etcd-cluster (issue 22): pin the leader's renewals to
//	                      the raft leader member (kit.Link.Pin: an nftables rule
//	                      resets the leader's connections to the other two
//	                      members' client ports, so that its client balances
//	                      everything onto that one; waited for until its /healthz
//	                      names that member alone in use), then cut that member
//	                      off from both peers for 1.5–2.5 TTL; healed, then unpinned
//	transfer-partition-raft-leader
//	                      etcd-cluster (issue 22): the same pin; the raft leader's
//	                      peer links delayed by 150 ms; it is asked to hand raft
//	                      leadership to one of the others (MoveLeader), and cut
//	                      off from both peers, for 1.5–2.5 TTL, as soon as that
//	                      one's own Status names itself the leader: before the
//	                      old one hears of the new term (logged from both
//	                      members' Status: it still leads the older term). Then
//	                      healed, the delay removed, unpinned. A transfer that
//	                      fails (MoveLeader errs, or the other does not lead
//	                      within 2 s) is noted, and nothing is cut
//
// The Redlock quorum (redlock: three independent redis-servers without
// persistence, electd with --store redlock://S1,S2,S3) is not proxied as
// a whole, but each node reaches each server through a fault proxy of its
// own: cut-follower and cut-leader cut all of a node's proxies,
// slow-leader and reset-leader act on all of them, and store-restart kills
// -9 every server and starts them again, empty. Its own faults, drawn only
// on it:
//
//	server-kill           kill -9 one server, start it again (empty) after 0.5–2.5
//	                      TTL: the leader keeps a majority
//	minority-restart      kill -9 a minority of the servers (one of three) and start
//	                      them again at once, empty, mid-term: the leader keeps a
//	                      majority; the restarted ones grant nothing for one TTL
//	rolling-restart       restart every server, empty, one after another, 0.2–1 TTL
//	                      apart: for a while a majority has forgotten the term and its
//	                      token, so the next token must come from the servers' clocks
//	                      (and the one that remembers) and still be greater
//	partition-majority    cut the leader's proxies to a majority of the servers for
//	                      1.5–2.5 TTL (cut just after they answered), while it still
//	                      reaches the rest: it must step down by its own deadline,
//	                      the majority-th latest acknowledgement + the window, which
//	                      the stop-late check holds it to as for cut-leader
//	partition-minority    the same for a minority of the servers: the leader keeps a
//	                      majority
//	slow-server           delay every node's proxy to one server by 1.2–2.5 renew
//	                      intervals each way for 1.5–2.5 TTL
//	sigstop-server        SIGSTOP one server for 0.5–2.5 TTL, then SIGCONT: its
//	                      clock ran on, so the leases it held lapse as it resumes
//	late-request          cut each node's proxy to one server, drawn at random (or
//	                      none), for 1.2–3 renew intervals, past a request's
//	                      timeout, so that the round gives up on what was written
//	                      and moves on; half of the time the leader resigns as the
//	                      hold begins (its leave lands on some servers first, the
//	                      successor's joins, withdraws and commits are held on
//	                      some). Healed without a reset: every held request lands
//	                      late, in order (a late withdraw must not end a term
//	                      early: issue 24)
//
// ZooKeeper (issue 30): zk is one standalone server, zk-ensemble three
// servers (tickTime 200 ms, syncLimit 5), each restarted on its data;
// electd's --store zk://P1[,P2,P3] names a fault proxy of the node's own
// in front of each server, and its client uses one server at a time, so
// cut-leader, slow-leader and reset-leader act on all of its proxies (on
// the ensemble the cut is not timed to a reply: cut-leader's bound on the
// deadline is looser there, and tight on zk) and store-restart kills -9
// every member at once. The ensemble's own faults, drawn only on it
// (zk_test.go, zk_partition_test.go), each healed once every member serves
// again under one leader:
//
//	kill-zk-leader        kill -9 the ensemble's leader, wait until the other two
//	                      follow a new one (noted), start it again 0–1.5 TTL
//	                      after the kill (or then, if later)
//	kill-zk-follower      the same for a follower: half of the time the one the
//	                      electd leader's session is connected to (the proxy that
//	                      carries its renewals), else either
//	rolling-zk            kill -9 and start every member, one after another in a
//	                      random order, each once the others serve under one leader
//	partition-zk          cut one member (half of the time the one the electd
//	                      leader's session uses, else any) off from its peers, both
//	                      ways, for 0.5–2.5 TTL, while its clients still reach it:
//	                      an nftables table drops every packet to or from its
//	                      quorum and election ports, of the peer connections it
//	                      holds (by its sockets in /proc), and of those it opens
//	                      later (it is moved into a cgroup v2 of its own, which a
//	                      rule matches). A follower cut off answers reads from
//	                      memory for up to syncLimit·tickTime (1 s) and its Syncs
//	                      fail, which is the case elector/zk's deadline rule
//	                      is built for; a leader cut off is replaced by the other
//	                      two. Without root, nft or a cgroup v2 hierarchy under
//	                      /sys/fs/cgroup it is noted as NOT APPLIED and logged
//
// The figures count, per kind, how often a new term followed: after the
// faults that leave the leader a majority, none should (a term that ends
// there is not unsafe, but worth a look).
//
// Every etcd-cluster fault is healed once every member follows one leader
// again; the time from the fault to the other two following a new leader
// is measured (kill-raft-leader, partition-raft-leader and the pinned two:
// "raft failover"). After the pinned two: how long the cut-off raft leader
// still named itself the leader by its own Status ("cut-off raft leader
// stepped down": it acknowledges renewals until then, up to two election
// timeouts), and after a transfer, the time from MoveLeader to the new
// one leading ("raft transfer"). The cut-off member acknowledges the
// pinned leader's renewals after the new raft leader extended its lease by
// one election timeout, so its deadline may lie beyond the lease's end
// there (issue 22). The record shows that only if the children overlap,
// and the supervisor stops a child stop-timeout plus the stop margin
// (700 ms at TTL 2 s) before that deadline; so after each of the etcd
// cluster's own faults followed by a new term, the harness also reads, from
// the electd logs (debug level), the old term's last deadline (the latest
// valid_until of its lease) and when the next term was elected: the figure
// "term gap", negative when the store let the next term begin before the
// deadline the old one had earned ("early successors", which the footer
// counts; not measured when the old electd's own revocation of its lease
// came first: it gave the term up). It is a check too: an early successor
// fails the run (earlySuccessor), even though the supervisor, its renewals
// failing, stops the child and gives the term up stop-timeout plus the stop
// margin before that deadline, so that the record would show an early
// successor only when it started a child before the old tree was gone.
// (Before electd proved each renewal, elector/etcd/renewal.go, the transfer
// fault made early successors of 23–335 ms with children that never
// overlapped.)
//
// A term should survive misconf and oom (transient errors never end a term
// while its deadline holds); the figures count how often it did ("term
// kept").
//
// Every kind is drawn once per round, in random order, so that a short run
// covers all of them. Each fault is healed before the next; then the
// harness waits until a child runs again (within TTL plus
// -torture.recovery of the heal), every copy's /leader agrees on it, and
// that holds for 800 ms. After a topology fault that moved the election's
// keys to another master (master-kill, master-sigstop, planned-failover, slot-failover,
// slot-manual-failover, reshard, a misconf the sentinels failed over) the
// bound is, if later, 2·TTL plus -torture.recovery after the new master
// took writes: the failover's own time (measured per fault, and shown as
// "store failover": about 3.3 s after a kill -9 under Sentinel with
// down-after 2000 ms, 2.1–2.8 s under Cluster) plus one TTL, in which the
// Redis backend grants no term as the new master reports a new run_id
// (a new epoch), plus the ordinary bound.
//
// After every fault it checks the whole record so far and fails at once
// with the seed, the recent faults and the electd logs if:
//
//   - two children's intervals (start to stop, or to the last beat)
//     overlap, tokens do not strictly increase in start order, or a worker
//     wrote at or after the first line of a later term (record.Log.Check:
//     a term lives until its last worker's last line) — except that a
//     SIGSTOPped child's interval, and its workers', end at their last
//     lines before it was resumed: a paused process resumes for a moment
//     after its lease has lapsed, which no sidecar can prevent;
//   - a worker process is alive once a later term has begun, or 1 s after
//     its electd was gone (pidns), or at the end of the run, after every
//     electd was kill -9'd (pidns): an orphan. Orphans are counted,
//     reported and killed; the run asserts there are none;
//   - the fenced resource — every record line is a write carrying its
//     writer's token, applied in the order the lines reached the file, and
//     accepted only with a token at least the highest seen — rejects a
//     write of a child that was never paused, or accepts a write that a
//     resumed child made after a newer term had written;
//   - a resumed child runs longer than stop-timeout + 2 s;
//   - a child, or (pidns) a worker, outlives its electd by more than 1 s;
//   - a leader cut off from the store (cut-leader, store-restart; on
//     Redlock, partition-majority) keeps its child until less than 100 ms
//     (half the stop margin) before the latest deadline its last
//     acknowledged renewal could have earned (the harness cuts just after
//     the store answered, so that bound is tight; on a topology, with no
//     proxy to watch, store-restart kills at any moment).
//
// A line torn by its writer's SIGKILL (record.SplitTorn) is dropped and
// listed in the figures with the offset where it broke off.
//
// It also fails if a copy exits on its own, if no child runs within TTL
// plus -torture.recovery of a heal, or if the copies' /leader do not agree
// within 30 s after that.
//
// It measures, per fault: the failover time (fault → first child of a new
// term), the handover gap (old child's end → new child's start, for
// SIGTERM, resign, kill -9 of the child or of its main process), the
// step-down margin (the same for faults that make the leader give its
// lease up: cut, slow link, reset, kill -9, store restart, pause), how long
// after a store fault the old child was gone (its whole tree: the old end
// is the later of its main process's and its workers' last lines), the
// stale window after a resume, and the recovery time after the heal; for
// kill9-main, and kill9-electd of a child with workers, the time from the
// kill to the last worker's last line and to the last worker gone from
// /proc, and for kill9-main the time from the main process's own last line
// to the last worker line. At the end it prints, per fault kind, min,
// median, p99 and max of each, the containment mode, the workers and the
// orphan count.
//
// `go test ./test/torture/` runs 16 faults per backend with TTL 2 s on all
// of them, two at a time on two cores; with the first five: 160–164 s on a shared machine, where
// the four without the etcd cluster took 132–133 s (etcd and Redis 42–49 s
// each, Cluster 46–58 s, the etcd cluster 52–56 s, Sentinel 72–77 s); in
// `make test`, beside the other packages, those four took 139 s of a
// 7-minute run. Redlock, the sixth, takes 52–58 s alone; with it the six
// took 170 s (with -race, load average about 1; redlock 54 s), and 232 s
// beside test/e2e, test/lock, test/kit and internal/testenv. The two
// pinned etcd-cluster faults (each about 1 s of pinning, a 3–5 s cut and a
// failover) made the etcd cluster's 16 faults take 58 and 62 s alone with
// -race, on seeds that drew both, where the same seeds took 64 and 48 s
// before them (load average 4–11 from other sessions: mostly noise).
// ZooKeeper (zk, zk-ensemble) took 55 and 61 s for 20 faults each, the two
// in parallel (load average 4–12), and 9 min 27 s and 11 min 43 s for 200.
// `make torture` runs the
// long version: TORTURE_FAULTS (default 200) per backend, writing the table
// to a report file. Knobs:
// -torture.seed, -torture.faults, -torture.topology-faults (faults on
// redis+sentinel, redis+cluster, etcd-cluster, redlock and zk-ensemble; default:
// -torture.faults),
// -torture.nodes, -torture.ttl,
// -torture.backends (kit.Select's names; redlockN is a quorum of N
// servers), -torture.recovery, -torture.report,
// -torture.containment (electd's --containment; under pgroup a leader whose
// child has workers is never kill -9'd, as that mode does not promise their
// death then), -torture.kinds (draw only these kinds, comma-separated,
// where they apply; restart-node is still forced when too few candidates
// are up), -torture.nobody (every electd runs as nobody, uid 65534, with
// no supplementary groups: containment as a non-root electd has it, userns
// by default; the harness stays root for its faults and checks), or the
// environment variables TORTURE_SEED, TORTURE_FAULTS,
// TORTURE_TOPOLOGY_FAULTS, TORTURE_NODES, TORTURE_TTL, TORTURE_BACKENDS, TORTURE_RECOVERY,
// TORTURE_REPORT, TORTURE_CONTAINMENT, TORTURE_NOBODY, TORTURE_KINDS; -torture.keep or TORTURE_KEEP=DIR
// copies the electd logs and the record log into DIR/BACKEND at the end;
// TORTURE_ELECTD_BIN tests a prebuilt electd, TORTURE_ELECTD_RACE=1 builds
// it with the race detector.
package torture
