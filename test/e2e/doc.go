// Package e2e holds the end-to-end tests of the electd binary against real
// stores: a real etcd and a real redis-server (started by internal/testenv
// on free loopback ports), several `electd run` processes, and
// test/recorder as the wrapped child.
//
// What the suite proves, for each backend with the same test code
// (TestBackends/etcd/..., TestBackends/redis/..., TestBackends/k8s/...,
// and on the topologies of kit.Topologies: redis+sentinel, redis+cluster, a
// Redlock quorum of three independent redis-servers (redlock),
// k8s+client-go (each scenario's Lease as a client-go elector created and
// released it, and led by client-go again after the scenario), and a
// three-member etcd-cluster, when $E2E_BACKENDS names it, as it picks any:
// kit.Selected says why the cluster is not run by default):
//
//   - safety: every child writes its start, heartbeats and stop to one
//     shared log; package test/record proves from it that no two children
//     ever ran at the same time and that fencing tokens only grew, after
//     every fault: SIGTERM, kill -9 and a network cut of the leader, a
//     resignation over HTTP, a store restart (etcd on its data, Redis
//     empty), children that exit on their own, ignore SIGTERM or leave
//     grandchildren behind;
//   - timing: after kill -9 the next child does not start before the old
//     lease could have lapsed on the store (TTL − renew interval after the
//     kill), the killed leader's child dies with it within a second, a
//     cut-off leader's child is gone before any lease deadline, a child that
//     ignores SIGTERM gets the whole --stop-timeout before SIGKILL;
//   - the contract's surface: exit codes (0 after SIGTERM, the child's code
//     or 128+signal with --on-exit=exit), --on-exit=restart keeps the term
//     and its token, /leader agrees on every copy, exactly one /readyz is
//     200, POST /resign hands over, `electd switchover --to ID` hands the
//     term to that copy past the one queued ahead of it, after the whole
//     tree of a child that ignores SIGTERM is gone (Switchover), the
//     child's environment carries
//     ELECTD_ELECTION, ELECTD_ID, ELECTD_FENCING_TOKEN and
//     ELECTD_LEADER_SINCE (the same instant as "since" of /leader on every
//     copy) and none of electd's own ELECTD_* settings (which may hold
//     secrets), and a grandchild dies with the child, even when electd is
//     killed with -9 ("no orphan keeps running");
//   - the child is its whole process tree (TreeMainKilled, TreeKill9,
//     TreeIgnoresTerm): the recorder's main process starts a worker in
//     its group, one in a session of its own and a double-forked daemon,
//     each logging under the term's token. When the main process is
//     SIGKILLed, under --on-exit resign (pidns, pgroup, and userns with
//     electd run as nobody), restart and exit (pidns, and userns as nobody),
//     no worker line is at or after the next run's first line, and
//     a watch on the log (package tree) finds in /proc, the moment each
//     run starts, no worker of an earlier run alive; none is left after
//     electd exits. kill -9 of electd in pidns mode (auto as root) and
//     userns mode (auto as nobody; asked for as root) takes the whole tree
//     within a second (the time is logged); in pgroup mode (asked for, or
//     auto's choice on a host without either namespace, made by a user
//     namespace of the test's with user.max_user_namespaces=0 and no
//     capabilities) the workers survive it, the documented limit. A tree that ignores
//     SIGTERM is SIGKILLed --stop-timeout after the SIGTERM, within the
//     margin, and before ValidUntil − margin when cut off. The mode in
//     force is in the start log line, /healthz and
//     electd_containment_info; --containment cgroup (not built), unknown
//     modes, pidns as nobody, and userns or pidns on a host without them
//     exit 2 naming the flag, why, and what would work;
//   - on a Redlock quorum (Quorum; skipped on the other stores): a leader
//     that loses one of the three servers (killed, then back empty; or its
//     own link to it cut) keeps its term and its child; one cut off from
//     two while it still reaches the third stops its child by its own
//     deadline, before the other copy's starts. A store restart there
//     restarts every server empty; a cut-off copy reaches each server
//     through a fault proxy of its own (kit.Link);
//   - `electd demo` runs its scripted failovers without an overlap.
//
// Handover and failover times are measured and logged (go test -v), never
// asserted beyond what the contract implies: the assertions are lower bounds
// that follow from the safety rule, and upper bounds that only catch hangs.
// Tests wait by polling conditions (HTTP endpoints, the record log, /proc)
// against deadlines, never by sleeping a guessed time.
//
// TestMain builds electd and the recorder once, into a temporary directory.
// Set E2E_ELECTD_RACE=1 to build electd with the race detector (slower), or
// E2E_ELECTD_BIN to test a prebuilt electd instead (a release build, or a
// deliberately broken one to see the suite catch it). A missing etcd or
// redis-server binary skips that backend loudly, or fails it when $CI is
// set, as internal/testenv does.
package e2e
