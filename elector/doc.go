// Package elector defines the backend-neutral leader-election contract of
// electd: the Elector interface, the Term a winner holds, the Leader record
// everyone can read, the queue a Queuer reads (`electd status`), typed
// errors, and the timing math behind the safety deadline.
//
// # Guarantees
//
// A Term's ValidUntil is a conservative local deadline. Every renewal the
// store acknowledges moves it to
//
//	sendTime + TTL·(1 − Drift) − Epsilon
//
// where sendTime is when that renewal was sent, read from this process's
// monotonic clock. The store extends the lease from when it received the
// renewal, which is later, so as long as the two clocks' rates differ by less
// than Drift (plus Epsilon of slack), the store cannot expire the lease, and so
// cannot grant the next term, before ValidUntil has passed here. A backend
// closes Done at the earliest of: ValidUntil passing without a renewal, the
// store reporting the lease or the leader key gone, Resign, or Close. It does
// not wait for a client library to notice a dead connection.
//
// Fencing tokens strictly increase across the terms of one election: a term's
// Token is greater than the Token of every earlier term.
//
// # Non-guarantees
//
//   - Clock rates. The rule assumes this host's clock and the store's clock
//     advance at rates that differ by less than Drift. A VM whose clock
//     stalls, or a store whose clock runs fast by more than that, breaks it.
//     Wall-clock steps (NTP) do not matter: only monotonic time is used.
//   - Paused processes. If this whole process (or host) is paused past
//     ValidUntil, it cannot act on the deadline while paused; when it resumes
//     it sees Done closed, but whatever its child did during the pause is not
//     prevented. That is what the fencing token is for: pass it with every
//     write and have the protected resource reject writes carrying a token
//     lower than one it has already seen.
//   - The store's own durability. A store that loses acknowledged writes
//     (Redis without persistence, an asynchronously replicated replica) can
//     forget a lease; backends document how they recover from that.
package elector
