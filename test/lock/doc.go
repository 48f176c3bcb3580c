// Package lock holds the end-to-end tests of `electd lock` against real
// stores: a real etcd and a real redis-server (started by internal/testenv
// on free loopback ports), many `electd lock` processes at once, and
// test/recorder as the locked command, whose start, heartbeats and end go to
// one shared log that package test/record reads.
//
// For each backend, with the same test code (TestBackends/etcd/...,
// TestBackends/redis/..., TestBackends/k8s/..., and on the topologies of
// kit.Topologies: redis+sentinel, redis+cluster, a Redlock quorum of three
// independent redis-servers (redlock), k8s+client-go (each scenario's Lease
// as a client-go elector created and released it, and led by client-go
// again after the scenario), and a three-member etcd-cluster when
// $LOCK_BACKENDS names it, as it picks any: kit.Selected says why the
// cluster is not run by default), the suite proves:
//
//   - mutual exclusion: ten concurrent `electd lock` processes each read a
//     shared counter file, run the recorder a while and write counter+1; the
//     counter ends at 10 and the record log shows no two runs overlapping,
//     with fencing tokens that only grow;
//   - `--wait 0` and `--wait D` exit 75 naming the holder while the lock is
//     held; SIGTERM to a waiter or a holder (143) leaves nothing in the store;
//   - the command's exit code passes through (0, 3, and 137 for SIGKILL);
//   - a holder cut off from the store by a black-holing proxy stops its
//     command before the next holder's command starts, and exits 76;
//   - `--slots 3` with six contenders: three commands run at once while
//     three wait, each release lets exactly one more in, the record log
//     never shows more than three at once, and each holder has its own
//     token; a candidate with another --slots is refused (exit 2). On
//     Redlock, which refuses semaphores by design (unsound over a quorum),
//     both scenarios check instead that `--slots 3` (and 2) exits 2 at
//     once naming --slots, runs nothing and leaves nothing queued, and
//     that --slots 1 is an ordinary lock;
//   - `--once-per` runs a job exactly once across five concurrent hosts, a
//     failed run records nothing so that the next host in line retries;
//   - `electd leader --watch` streams changes as text or JSON lines until
//     SIGINT, then exits 0;
//   - the command is its whole process tree (TreeMainKilled): when its main
//     process dies and leaves workers (group, setsid, daemon) behind,
//     electd exits only once they are gone, the next holder's command
//     starts only then (checked in /proc the moment its first line
//     appears, by test/e2e/tree), with pgroup too; with --once-per a
//     killed run records nothing, and a successful one is recorded (read
//     from the store as it appears) only after every worker is gone;
//     --containment cgroup exits 2.
//
// Handover times (one holder's command ended to the next one's started)
// are logged with go test -v, not asserted. Tests wait by polling
// conditions against deadlines, never by sleeping a guessed time. With
// ELECTD_LOCK_MEASURE=1, TestMeasureIdleWaiter also measures the store
// requests a waiting `electd lock` sends per minute (about 75 s).
//
// TestMain builds electd and the recorder once, into a temporary directory;
// E2E_ELECTD_BIN tests a prebuilt electd instead.
package lock
