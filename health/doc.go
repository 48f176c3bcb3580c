// Package health is electd's HTTP face: who leads, whether this copy is
// ready, alive and healthy, its Prometheus metrics, and a way to hand
// leadership over.
//
// A View keeps the current leader, fed by an Observer (an elector.Elector's
// watch-driven Observe), so no request asks the store. Metrics holds the
// electd_* collectors. Server serves the endpoints below.
//
// # Endpoints
//
// Every JSON answer has Content-Type application/json and Cache-Control
// no-store. Each GET endpoint also answers HEAD. A known path asked with
// another method gets 405 with an Allow header; an unknown path gets 404.
//
//   - GET /leader: 200 and
//     {"election":E,"leader":{"id","address","fencing_token","since"},"holders":[…],"self":{"id","leader"}}
//     where since is RFC 3339 with nanoseconds in UTC and self.leader says
//     whether this copy holds a term now. When no leader is known (none
//     leads, or the view has not heard from the store yet) it is 503 with
//     "leader":null and "holders":[]. The answer comes from the View, never
//     from the store.
//     "holders" lists every holder: the leader alone (or none), or with
//     Config.Holders (a --slots N semaphore) every holder, read from the
//     store per request (the one exception to "never from the store").
//   - GET /status: Config.Status's report (`electd status -o json`), 200
//     when the store answered it, else 503; it asks the store, at most
//     maxStoreReads requests at once, /leader's of a semaphore included
//     (then 503 with Retry-After, and /leader names the leader alone);
//     501 without Config.Status.
//   - GET /leader/watch: Server-Sent Events. Each event is "event: leader"
//     with "data:" the same JSON as /leader: one at connect, then one per
//     change, in order (a slow client may skip intermediate leaders but
//     always gets the newest). A comment line is sent every 15 s as a
//     heartbeat. The stream ends when the client disconnects, the server
//     shuts down, after an hour (the client reconnects), or when one write
//     (an event or a heartbeat) takes longer than the write timeout (30 s: a
//     client that stopped reading). At most MaxStreams streams are open at
//     once, and MaxStreamsPerClient from one client address; beyond that
//     the answer is 503 with Retry-After. When all MaxStreams are taken, a
//     new stream takes the slot of the oldest one if that is older than the
//     write timeout (the old client reconnects), so clients that hold
//     streams without reading cannot keep a new watcher out for longer.
//   - GET /readyz: Config.ReadyCode (default 200) when Config.Ready says
//     ready, else Config.NotReadyCode (default 503), with {"ready","reason"}.
//     This is the endpoint a load balancer or a Kubernetes Service gates on.
//   - GET /livez: 200 {"status":"ok"} while electd's own loop is alive, else
//     503 {"status":"error","error":...}. It does not depend on the store,
//     so a store outage does not get electd restarted.
//   - GET /healthz: 200 {"status":"ok"} when the store is healthy, else
//     503 {"status":"error","error":...}, bounded by a short timeout. The
//     body names the containment mode, and lists the store requests that
//     fail now (store_errors, from Config.StoreFailures): 503 while any
//     does. For a store of several members (etcd: Config.StoreMembers) it
//     lists each of them (store_members: endpoint, id, name, answers,
//     error, the leader it follows as {"id","name"} or null, in_use,
//     streams), and they decide instead of Config.Healthy: 200 while at
//     least one member that the store's requests go to (in_use) answers
//     with a leader, 503 naming what each member lacks otherwise. A member
//     cut off from its peers, or down, next to one like that fails
//     nothing: the requests still reach a quorum. Healthy is not asked
//     then: a request to the store goes to any member in use, a
//     leaderless one included, and waits there until its timeout. Without
//     members (Redis), Healthy decides.
//   - GET /metrics: Prometheus exposition of Config.Gatherer.
//   - POST /resign: hand leadership over now. 200 {"resigned":true} on
//     success; 409 when this copy does not lead; 500 {"error":...} when
//     resigning failed; 501 when the copy cannot resign; 403 when the caller
//     is not allowed (below).
//
// # Separate admin listener
//
// With Config.SeparateAdmin (electd run --admin-listen), /metrics and
// POST /resign are served by AdminHandler (ServeAdmin) and no longer by
// Handler (Serve), which then answers 404 for them: bind the admin listener
// to loopback or a management network, and expose the main one to probes
// and load balancers.
//
// # Limits
//
// Both listeners read request headers within 5 s and at most 16 KiB, bodies
// of at most 4 KiB (no endpoint reads one), a whole request within 10 s, and
// write an answer within 30 s (streams excepted); idle connections close
// after 2 minutes. At most 8 /metrics scrapes run at once; beyond that the
// answer is 503.
//
// # Security of /resign
//
// POST /resign is allowed when the TCP peer (the connection's remote
// address, never X-Forwarded-For or similar headers, which the client
// writes) is a loopback address, or when an admin token is configured and
// the request carries "Authorization: Bearer <token>"; the token is compared
// in constant time. With Config.RequireToken the loopback exemption is off
// and every peer needs the token. Everything else gets 403. Cross-site
// browser requests are refused as well (http.CrossOriginProtection), so a
// web page open on the same host cannot make the browser resign on its
// behalf.
//
// DNS rebinding: a request from loopback must name, as its Host, a
// loopback address, localhost (or a name under .localhost), the address it
// connected to, or one of Config.AllowedHosts (electd's --listen and
// --admin-listen hosts and --allow-host); any other is refused with 403 on
// every endpoint. A web page whose name its attacker rebinds to 127.0.0.1
// reaches electd from the browser on this host with its own name as Host
// (and a matching Origin, which CrossOriginProtection accepts); without
// this check it would have loopback rights. Requests from other addresses
// are not checked.
//
// Consequences for operators: a reverse proxy or sidecar on the same host
// (nginx on localhost, Istio's Envoy connecting from 127.0.0.6) connects
// from loopback, so it passes every request on with loopback rights; behind
// one, set RequireToken (electd's --admin-token-required), or keep /resign
// out of its reach. The token travels in clear text over plain
// HTTP: use it on trusted networks or behind TLS. The other endpoints are
// read-only and unauthenticated; /leader reveals the leader's advertised
// address and /healthz the store error text.
//
// # Metrics
//
// All names have the prefix electd_ and the constant label election:
// is_leader, fencing_token, leader_changes_total, acquisitions_total{result},
// campaign_wait_seconds, renewal_seconds, leadership_lost_total{reason},
// lease_remaining_seconds, child_running, child_starts_total,
// child_exits_total{outcome}, store_errors_total{op,class,server}; plus the Go and
// process collectors. Known label values start at 0.
package health
