// Package rediscore is the one Redis elector core under electd's two
// Redis backends: the single-server, Sentinel and Cluster backend
// (elector/redis) and the Redlock quorum (elector/redlock). Each backend's
// Elector holds a Core and builds its bus on Listeners; what is here is
// written once for both:
//
//   - Core: the Elector's lifecycle (one campaign at a time, the term's
//     goroutines, Close), the campaign's preamble (subscribe, then wait
//     for the subscription before joining), the highest fencing token
//     seen (sent with every step), the wake-up count, and the timing of
//     requests, cleanups, backoffs and queue entries.
//   - Listeners: the bus's wake-ups of the campaigns, renewals and leader
//     view waiting on the election's pub/sub channel.
//   - The Lua both backends' scripts begin with (Prelude), the script that
//     reads a leader view (ViewScript) and the one that asks whether a
//     switchover's target waits (QueuedScript).
//
// What is each backend's own stays in its package: the step script (the
// lease rule, grants, tokens, the epoch wait it calls), the queue's keys,
// and for Redlock the rounds over N servers, the quorum lease rule, the
// commit of a token and the handover. The pieces that need no Elector
// (error classes, client options, patience, the run record, the epoch
// rule's Lua, the decoding of views and channel messages) are in
// rediskit.
package rediscore
