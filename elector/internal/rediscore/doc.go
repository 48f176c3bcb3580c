// Package rediscore is the one Redis elector core under electd's two
// Redis backends: the single-server, Sentinel and Cluster backend
// (elector/redis) and the Redlock quorum (elector/redlock). Each backend's
// Elector holds a Core and builds its bus on Sub and Listeners; what is
// here is written once for both:
//
//   - Core (core.go): the Elector's lifecycle (one campaign at a time, the
//     term's goroutines, Close), the campaign's preamble (subscribe, then
//     wait for the subscription before joining), the highest fencing token
//     seen (sent with every step), the wake-up count, and the timing of
//     requests, cleanups, backoffs and queue entries.
//   - term.go: the steps of a candidacy and a term that both take alike:
//     the wait between steps, the pause between renewals, the start and
//     end of a term, the bounds of a resignation and of a cleanup.
//   - Sub (sub.go): one subscription to the election's channel on one
//     connection, re-subscribed after every failure; the single-server bus
//     runs one, Redlock's one per server. Listeners (listeners.go): the
//     bus's wake-ups of the campaigns, renewals and leader view.
//   - Alarm (alarm.go): the leader view loop's wake-up when a lease runs
//     out.
//   - scripts.go: the Lua both backends' scripts begin with (Prelude), the
//     script that reads a leader view (ViewScript, ReadView) and the one
//     that asks whether a switchover's target waits (QueuedScript), and a
//     script call that tells the patience (Call).
//
// What is each backend's own stays in its package: the step script (the
// lease rule, grants, tokens, the epoch wait it calls), the queue's keys,
// and for Redlock the rounds over N servers, the quorum lease rule, the
// commit of a token and the handover. The pieces that need no Elector
// (error classes, client options, patience, the run record, the epoch
// rule's Lua, the decoding of views and channel messages) are in
// rediskit.
//
// # What both backends do alike
//
// The backends' package documentation refers here for these.
//
// Requests. A request to a server waits one renewal interval for its
// reply; after a timeout, which costs the connection (the retry must
// reconnect: HELLO, then the script), the next one to that server waits
// twice as long, up to four intervals and half the TTL, and every reply
// halves it again (rediskit.Patience), so that a slow server is waited for
// rather than never answered again. A store error of any class, transient
// or not, costs the request it answered, never a term: a renewal is
// retried with backoff, and only the deadline or the store's own word
// ends a term. Every failure is counted by class (elector.ErrorClass: the
// Redis error code, "conn", "timeout", ...) and logged at most once per
// class and 30 s.
//
// No polling, no herd. A step that changes a queue's head or its term
// publishes "<mode> <head entry>" (and, on Redlock, the entry whose step
// it was) on the election's channel, followed by the leader view after
// the change; a waiter re-runs its step only for a message naming itself.
// Otherwise it sleeps until its next renewal or until the moment, read
// from the server, at which what keeps it back may have lapsed (a crashed
// predecessor's lease, the end of the state's first TTL); each renewal
// re-arms that timer. A crashed leader is thus replaced about one TTL
// after its last renewal, by its successor alone. A subscription silent
// for a TTL is pinged, and dropped if silent for another (rediskit.Receive).
//
// The leader view. Leader and Observe read a view kept current without
// requests of its own: every message carries the view after the change,
// and so does every reply to the Elector's own steps, each stamped with
// the server time it was read at, so that an older one never overwrites a
// newer. The view reads a server itself only on (re)subscription
// (messages may have been missed) and when the lease it reported runs out
// (a crashed leader publishes nothing). Observe delivers every state the
// view learns, each subscriber through its own queue (elector.Hub).
//
// Lost state. A server may lose acknowledged writes (a restart without
// persistence or with a snapshot behind the latest writes, a failover, a
// flush, a deletion or an eviction). A state that may have lost writes
// starts a new epoch, and grants nothing until one TTL after it began:
// every lease acknowledged before the loss was renewed before it, so every
// local deadline derived from one has passed by then. The rule is
// rediskit.EpochLua: each database keeps a server record,
// electd:server:db<N> (the run electd saw there: INFO run_id and
// master_replid; when electd first saw it, why, the latest step, and a
// field per election that has had state there), and each election its
// born record; a missing or other run, a missing born record the server
// record expects, or a step that finds the state behind what its
// candidate saw (a higher token, a later step of its own) begins an epoch.
// A campaign kept back by an epoch logs, once, why and until when.
//
// The run record. RecordRun keeps a once-per-period run record in the
// election's lastrun key without a TTL, so that no eviction policy but
// allkeys-* may drop it: it lapses by the server's clock
// (rediskit.RecordRun). The first read or write of a record by an Elector
// warns if a server's maxmemory-policy may evict it.
//
// Channels. Keys live in the client's database, but channels are
// server-wide: the channel names the database (rediskit.Channel), so that
// one election name in two databases of one server does not share one.
package rediscore
