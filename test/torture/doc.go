// Package torture attacks a cluster of real electd processes on real stores
// with randomly interleaved faults and proves, from the children's own
// record, that electd kept its promise: at most one child ran at any
// instant.
//
// TestTorture builds electd and test/recorder, and for each backend (etcd
// and Redis, in parallel) starts the store as its own process
// (internal/testenv), N electd processes (default 5) that each reach the
// store through their own internal/faultproxy, and lets every child append
// to one shared record log (test/record). The children are a mix (n1, n4:
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
//	                 containment kills the tree with electd: pidns)
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
//	                 (etcd on the same data dir, Redis empty)
//	restart-node     start a candidate that died again (forced when fewer
//	                 than max(2, N−2) are up)
//
// Every kind is drawn once per round, in random order, so that a short run
// covers all of them. Each fault is healed before the next; then the
// harness waits until a child runs again (within TTL plus
// -torture.recovery of the heal), every copy's /leader agrees on it, and
// that holds for 800 ms.
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
//   - a leader cut off from the store (cut-leader, store-restart) keeps its
//     child until less than 100 ms (half the stop margin) before the latest
//     deadline its last acknowledged renewal could have earned (the harness
//     cuts just after the store answered, so that bound is tight).
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
// `go test ./test/torture/` runs 16 faults per backend with TTL 2 s (a few
// minutes at most). `make torture` runs the long version: TORTURE_FAULTS
// (default 200) per backend, writing the table to a report file. Knobs:
// -torture.seed, -torture.faults, -torture.nodes, -torture.ttl,
// -torture.backends, -torture.recovery, -torture.report,
// -torture.containment (electd's --containment; under pgroup a leader whose
// child has workers is never kill -9'd, as that mode does not promise their
// death then), or the environment variables TORTURE_SEED, TORTURE_FAULTS,
// TORTURE_NODES, TORTURE_TTL, TORTURE_BACKENDS, TORTURE_RECOVERY,
// TORTURE_REPORT, TORTURE_CONTAINMENT;
// TORTURE_ELECTD_BIN tests a prebuilt electd, TORTURE_ELECTD_RACE=1 builds
// it with the race detector.
package torture
