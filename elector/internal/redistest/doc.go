// Package redistest is what the tests of electd's two Redis backends
// share: elector/redis (one server, Sentinel, Cluster) and elector/redlock
// (a quorum of independent servers). It is imported only by their tests.
//
//   - CommandStats (stats.go): a server's INFO commandstats, by command,
//     for the tests that count what a candidate sends.
//   - SlowAfterReconnect (patience.go): the patience scenario both run
//     (rediskit's patience), a store slow enough that a new connection's
//     two round trips miss the request timeout, with each backend's own
//     leader, proxies and timing.
//
// What a backend's tests alone use, or what needs a backend's unexported
// names (its keys, its Elector's fields), stays in that package's own test
// files.
package redistest
