// Package redis is the Redis backend of electd: an elector.Elector kept in
// one Redis server (standalone, Sentinel-managed or Cluster) with Lua scripts
// and pub/sub, through github.com/redis/go-redis/v9.
//
// What is where: this package keeps the single server's own part (the
// step script with its lease rule, grants, tokens and semaphore slots, its
// keys, WAIT and the sentinels' confirmation, the leader view); the
// lifecycle, the campaign's waits, the subscription, the bus's listeners
// and the shared Lua are elector/internal/rediscore's, written once with
// Redlock, and so is the description of what both do alike (requests and
// their patience, store errors, messages and wake-ups, the leader view,
// the epoch rule, the run record), which this documentation does not
// repeat.
//
// # Algorithm
//
// Every candidacy is an entry "ID#random" in a sorted set scored by an
// arrival sequence (INCR), so candidates are served in arrival order. Each
// entry has its own lease: a deadline computed inside the scripts from the
// server's clock (redis.call('TIME')) as server now + TTL, never from a
// client's clock. One script (stepScript) does everything that changes the
// state, atomically: it prunes every entry whose deadline has passed by the
// server's clock, joins or renews the caller, grants the term when it can,
// and answers with the caller's status. A candidate renews every
// RenewInterval, while waiting as well as while leading, and records each
// renewal's send time: an acknowledged renewal moves its local deadline
// (elector.Deadline) to sendTime + TTL·(1 − drift) − ε, which is before the
// server's deadline for the same renewal, since the server measured from
// when it received it.
//
// The term goes to the head of the queue, and only when no live entry holds
// it: the previous holder must have resigned or been pruned, which happens
// only after its server-side deadline, after its own ValidUntil. Whichever
// script finds the term free grants it (a resigning leader's script grants
// it to its successor at once). The fencing token is max(last token + 1,
// server TIME in microseconds, the highest token the caller has seen + 1),
// stored, so it grows across terms even when Redis loses the counter: every
// step carries the highest token its Elector has seen (its own, or any
// leader's in its view), and the script raises the stored token to it first.
//
// A term's Done closes at the earliest of: its local deadline passing
// without an acknowledged renewal (the cut-off leader steps down before the
// store could grant the next term), a renewal finding the entry gone
// (ErrLeaseLost) or the term held by another (ErrLeadershipLost), Resign
// (ErrResigned), Close (ErrClosed). Unless it resigned, the Elector then
// removes its entry, best effort, so that a reachable store hands over at
// once instead of one TTL later.
//
// Store errors, requests, messages and wake-ups, and the leader view are
// as rediscore describes: a store error of any class (MISCONF, OOM,
// READONLY, LOADING, BUSY, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, a reset
// connection, a timeout, even an ACL that now refuses) costs the renewal
// it answered, never the term; a campaign ends only on a refusal retrying
// cannot fix (credentials, ACL, scripting disabled). A waiter sleeps until
// its next renewal or the deadline of the candidate just ahead of it (by
// the server's clock). An idle candidate costs one script call per
// RenewInterval; Wakeups counts the re-checks. Should Redis's clock step
// back, the view may keep an older value for up to one TTL, until its next
// read; a copy that only watches (electd leader --watch) costs one
// read-only script call per TTL while a leader is alive, and a state that
// lasts less than one round trip (between two messages) may be read past. A resigning leader's script
// grants the successor in the same step, so a handover shows no "none" in
// between, except under Sentinel: there a grant counts only once a replica
// has it (WAIT, below), and the script writes it before its WAIT, so a
// grant is pending (term's pending, a holder's " p") until its holder
// renews it, which it does at once when the grant counted. The view names
// no pending holder: a candidate whose grant never reached a replica (no
// replica left) does not lead, and no copy names it. A handover there
// shows "none" for the successor's round trip. A message without the view (from an electd that predates it,
// during a rolling upgrade; the keys are the same) makes the view read the
// state itself.
//
// # Keys
//
// All keys of election NAME carry the hash tag {NAME}, so one Redis serves
// many elections and Redis Cluster keeps each election on one slot:
//
//	electd:{NAME}:queue   ZSET  entry → arrival sequence
//	electd:{NAME}:expiry  ZSET  entry → lease deadline (server µs)
//	electd:{NAME}:cand    HASH  entry → "ID\nADDRESS"
//	electd:{NAME}:term    HASH  entry, id, address, token, since (server µs),
//	                            pending (until the holder's first renewal, under Sentinel)
//	electd:{NAME}:seq     STRING arrival counter
//	electd:{NAME}:token   STRING last fencing token
//	electd:{NAME}:born    HASH  at (server µs), run ("run_id master_replid"),
//	                            why, last (server µs of the latest step)
//	electd:{NAME}:slots   HASH  entry → slot count (semaphores only)
//	electd:{NAME}:holders HASH  entry → "token since", " p" appended while
//	                            pending (semaphores only)
//	electd:{NAME}:lastrun STRING once-per-period run record (JSON), no TTL
//	electd:{NAME}:events  pub/sub channel, in database 0
//	electd:{NAME}:db<N>:events  pub/sub channel, in database N > 0
//	electd:server:db<N>   HASH  run, at (server µs), why, last, and
//	                            electd:{NAME}:born → server µs for every
//	                            election with state (one per database;
//	                            under Cluster, electd:{NAME}:server)
//
// Keys live in the client's database, but channels are server-wide: the
// channel names the database, so that the same election name in two
// databases of one server does not share one (its watchers would take the
// other's leader for their own). Database 0, the only one of a Cluster,
// keeps the name of electd versions before the database was in it.
//
// An idle election keeps only seq, token and born (and lastrun, until a
// read finds it lapsed), and its field in electd:server:db<N>. The ACL user needs
// EVALSHA and EVAL, SUBSCRIBE and PING on the channel, and inside the
// scripts TIME, INFO, PUBLISH, and string, hash and sorted-set commands on
// these keys.
//
// # Locks and semaphores
//
// TryCampaign runs the script in mode "try": a join that, unless the entry
// is granted at once, removes it again in the same script and answers
// "busy" (elector.ErrBusy), so a failed try leaves nothing behind. Only
// when the entry is first in line and nothing but the state's first TTL
// (below) keeps it back does it wait, as a normal candidate.
//
// With Slots N > 1 the election is a semaphore: the holders are the HASH
// holders instead of term, each with its own token (the same counter), and
// the script grants free slots to the first entries of the queue in order,
// so holders are always among the first N entries. A grant to another entry
// publishes "grant <entry>", which wakes that entry alone: a release wakes
// one waiter, as with one slot. The first waiter sleeps until the earliest
// holder's deadline, every other waiter until that of the entry just ahead
// of it, so a crashed holder is replaced in about one TTL by the first
// waiter alone. Each entry of a semaphore records its N in slots (absent:
// 1); a join whose N differs from the head's is refused with status "slots"
// (an *elector.SlotsError) before it is added. Leader and Observe report
// the holder first in line.
//
// RecordRun and LastRun keep a once-per-period run record in lastrun
// (rediscore; ForgetRun deletes it, in a script). Under volatile-* a
// record with a TTL was the one key of the election Redis could evict,
// and the job then ran again within its period: hence none. Its JSON
// begins with "server_expires_us", the server's TIME at which the period
// ends. A record written with PX, by an electd before this format, is read
// as before: live while the key exists; an electd before this format reads
// a record without a TTL as live until one of this format reads it lapsed
// and deletes it (after a downgrade, delete the key).
//
// # Lost state, and when a campaign waits one TTL
//
// Redis may lose acknowledged writes (an fsync-per-second AOF behind the
// latest writes, a failover to an asynchronously replicated replica, ...).
// Then a leader may still hold a valid term locally while the store no
// longer knows it, and granting the next term at once would give two
// leaders: hence the epoch rule (rediscore, "Lost state").
//
// Each database N keeps a server record, electd:server:db<N> (its key
// names the database, so that a database swapped in by SWAPDB, or a record
// moved by MOVE, is not taken for this one's: it begins an epoch): the run electd saw
// there (INFO run_id, the process, and master_replid, its replication
// history, new at every promotion, so that a master that failed over and
// back without restarting, and now holds its replica's older copy under
// its old run_id, is another run too), when electd first saw that run,
// why, the latest step of any election, and a field for every election
// that has had state there. Every step writes it, in the same script as
// the election's own state. Each election keeps its born record (when and
// why its epoch began, the run, its latest step). A new epoch begins:
//
//   - for every election, at the first step where the server record is
//     missing (a restart without persistence, the database's first use by
//     electd, FLUSHALL or FLUSHDB, its deletion or eviction) or names
//     another run (a restart that kept its data, a failover, a failback);
//   - for one election, where its born record is missing although the
//     server record names the election (its keys were deleted, flushed or
//     evicted), or where it lost writes a candidate saw (below).
//
// A name that the server record does not know, on a server whose record
// is older than one TTL, is new: its epoch is the server record's, long
// over, and its first campaign is granted at once (2 ms measured with a
// 15 s TTL, against 15.4 s before this rule). A campaign that does wait
// for an epoch logs one INFO line saying why (the condition) and until
// when. uptime_in_seconds only names the condition (a restart less than
// one TTL ago): the server record, not the uptime, dates a run, since a
// promoted replica may have been up for long.
//
// A state restored under the same run (a VM snapshot of the Redis host
// reverted, a process restored with CRIU, an older RDB loaded by DEBUG
// RELOAD) names the same run_id and master_replid; it shows through the
// writes it lost, and a new epoch begins there too. Every step carries the
// highest token its candidate has seen and the latest server time one of
// its own steps was answered at, and records the server time it runs at in
// born's and the server record's last (the latest of them: last never goes
// back). A token above the stored one means the state lost a grant; a step
// time after the election's last means it lost that step, renewals
// included, and one after the server record's last means the whole
// database was restored: every election starts an epoch. A leader whose
// entry vanished ends its term at its next renewal, or at once when its
// subscription is re-established (ErrLeaseLost); a waiter whose entry
// vanished rejoins. A leader whose entry survived (persistence, a replica
// that was up to date) keeps leading.
//
// The cost: the first campaign on a database electd has not used yet, and
// every campaign after a Redis restart, failover, flush or lost server
// record, waits one TTL before any term is granted. Under Redis Cluster a
// script may touch only its election's slot, so the server record is the
// election's own (electd:{NAME}:server): there every new name still waits
// one TTL.
//
// # Sentinel and Cluster
//
// Under Sentinel (DialSentinel) the client follows the master the
// sentinels name, and every step that joins, waits, holds or grants, and
// every run record, is followed, on the same connection, by WAIT 1: its
// reply counts only once a replica has its writes (Config.Replicas), else
// it is a failed request of class "unreplicated". A master cut off from its
// replicas, which the sentinels then fail over, thus cannot keep renewing a
// leader on its side of the partition, nor grant a term the new master
// never saw. A step that leaves (a resignation) is not waited for: an entry
// left behind expires, and the successor acts only on its own step, whose
// WAIT covers what came before it on the master. WAIT does not make the
// write durable on the replica that is promoted (Sentinel picks the most
// up-to-date one it can reach, which may lack the last renewal); the epoch
// rule covers that.
//
// WAIT alone does not stop an old master that keeps a replica: in a
// failover (SENTINEL FAILOVER, or of a stalled master) the sentinels
// promote one replica and name it the master at once, so that new
// connections go there, but move the other replicas to it only
// parallel-syncs at a time, each a full resync; meanwhile a leader renewing
// on the old master over its open connection still passes WAIT 1, and a
// candidate that lands on the promoted replica is granted one TTL after
// its epoch began, while the leader is still valid (issue 24). So every
// step that WAIT waits for must also be confirmed by the sentinels
// (Config.Sentinels): after the step and its WAIT returned, the run_id of
// the server it ran on is read on the same connection (from born, which
// the step has just written), with the server's own address of that
// connection (CLIENT INFO laddr), and every sentinel of the URL is asked
// (SENTINEL MASTER) whether it monitors that server as the master with no
// failover of it in progress: by run_id, or, while the sentinel has not
// read its new master's run_id yet (it does at its next INFO of it, up to
// 10 s after a switch), by the address it names it by. Any other answer,
// or none, makes the step a failed request of class "unconfirmed". This
// proves the step was sent
// before any replica was promoted: a sentinel raises failover_in_progress
// before it sends REPLICAOF NO ONE, and lowers it only when it monitors
// the promoted replica (another run_id) or gives the failover up. A
// promoted replica's first step thus comes after the step; it starts a new
// epoch (the promotion changed its master_replid), and no term is granted
// there for one TTL, after every local deadline derived from the step.
// A replica promoted by hand is covered the same way once the sentinels
// are pointed at it (SENTINEL REMOVE and MONITOR), as long as candidates
// reach it only through them. The costs: one SENTINEL MASTER per sentinel
// (asked at once) per step; no step counts during a failover, which a
// leader rides through only if it ends within the remaining lease; and no
// step counts while any sentinel of the URL cannot be asked (electd warns
// at start of sentinels it cannot ask, and of sentinels the URL leaves
// out): a sentinel that was not asked could have promoted a replica
// (SENTINEL FAILOVER needs no other sentinel's vote).
//
// Under Cluster (DialCluster) the election's keys and channel share one
// hash slot, so every script runs on the slot's master, and the client
// follows MOVED and ASK; while the slot migrates, a script any of whose
// keys is not on the node it runs on (some never exist) is answered
// TRYAGAIN, so every step fails, and is retried, until the migration ends.
// A promoted replica starts a new epoch as under Sentinel. There is no WAIT
// (the cluster client routes the script, and WAIT must follow it on the
// same connection; a pipeline on the slot's node client would do it, at the
// cost of following redirections ourselves: not built). Instead this rests
// on Redis Cluster's failure detection: a master cut off in a minority must
// stop accepting writes no later than TTL·drift + ε after the majority
// promotes a replica (the promoted replica then grants nothing for one
// TTL). Both sides time out after cluster-node-timeout, each from its own
// pings, and the promotion waits at least 500 ms more, so the minority
// usually stops first (0.32–1.43 s before, measured with a 3 s node
// timeout), but nothing in Redis orders the two.
//
// # Guarantees
//
// At most one term is valid at any instant (every ValidUntil of a term ends
// before the next term is granted) and fencing tokens strictly increase,
// provided:
//
//   - the rates of the candidates' clocks and of the Redis server's clock
//     differ by less than Timing.Drift;
//   - the Redis server's wall clock is not stepped forward (TIME is the
//     wall clock: a forward step expires leases early; let NTP slew, not
//     step, on the Redis host); a backward step is safe for terms, and for
//     tokens as long as the token key survives (if it is lost too, tokens
//     keep growing only if the clock has not gone back past the last one);
//   - every candidate of an election uses the same TTL;
//   - no one else writes the electd:{NAME}:* keys or electd:server:db<N>, and
//     Redis does not evict them: use noeviction or a volatile-* policy (no
//     key of electd's has a TTL, the run record included, except one
//     written by an electd before its current format); allkeys-* may evict
//     any of them, and electd warns at start. The epoch rule sees a born
//     record or a server record evicted (a new epoch), but not a term or
//     an entry evicted alone.
//
// # Non-guarantees
//
//   - A replica promoted by Sentinel or Cluster failover may lack writes;
//     the epoch check above covers it only because the new primary reports a
//     new run_id or master_replid. A master that has had no replica for
//     repl-backlog-ttl (default one hour) changes its master_replid too: one
//     new epoch, in which a handover waits up to one TTL.
//   - Under Sentinel, an old master that keeps a replica while another is
//     promoted (a planned failover, or a partition) is covered by the
//     sentinels' confirmation above only if the URL names every sentinel
//     that monitors the master (one left out could promote a replica
//     unseen), and if candidates reach a replica promoted otherwise (by
//     hand, or by a failover the sentinels then gave up, which leaves the
//     replica a master they do not name) only through the sentinels once
//     they monitor it; and, in the few seconds after a sentinel switched
//     to a new master and before it read its run_id, that the address it
//     names the master by is, on the server, the address of the client's
//     connection to that very server (no translation that shows another
//     server under the same address). Under Cluster, a minority master that accepts writes
//     for longer than TTL·drift + ε after the promotion is not covered
//     (see above).
//   - A run record (RecordRun) is waited for (WAIT) but not confirmed by
//     the sentinels: one written on an old master that kept a replica
//     after another's promotion can be lost, and the run then repeated
//     within its period.
//   - A state restored under the same run_id and master_replid (a reverted
//     VM snapshot, a restored process) starts a new epoch only when its
//     first step comes from a candidate that saw what it lost (a later
//     token, or an answer to a step of its own after the snapshot). One
//     whose first step comes from a candidate that has made no step since
//     the snapshot and saw no later token (one that just started, one cut
//     off from Redis since, or a watcher that then campaigns) may grant at
//     once, while the leader's ValidUntil runs, if the restored deadlines
//     have passed (or, for an election the snapshot predates, at once).
//     Candidates renew every RenewInterval, so a snapshot older than that
//     is seen by any candidate that kept running, of any election on the
//     database (the server record's last).
//   - The server record dates a run from electd's first step on it. Under
//     Sentinel every counted step was sent before any promotion (see
//     above), so one TTL after that first step every lease the lost state
//     granted has lapsed. A replica promoted by hand, that candidates
//     reach by other means than the sentinels while the old master still
//     takes steps, is not covered (it was not before: the epoch then began
//     at each election's first step on it, which may also precede a
//     renewal on the old master).
//   - An electd before the server record, running beside this one in a
//     rolling upgrade, does not record its elections in it: an election
//     in which only such copies stepped, and whose keys are then deleted
//     (by hand, or evicted under an allkeys-* policy, itself unsupported),
//     looks new to an upgraded copy, which may be granted at once while a
//     cut-off old copy's term is valid. Do not delete electd's keys while
//     a rolling upgrade from a version without it is under way. The server
//     record's first step (after the upgrade) starts one epoch for every
//     election of the database.
//   - A --store repointed to another server while a leader still reaches
//     the old one is a split configuration: the old leader renews there for
//     good, whatever the new server waits.
//   - Tokens rest on the new server's clock after a state loss only when no
//     candidate that saw the last token makes a step (joins, waits or
//     holds) on the new state before the next grant: electd keeps the
//     highest token it saw in memory, not on disk, and a copy that only
//     watches (electd leader --watch) never writes it.
//   - A quorum over several independent Redis servers is the redlock
//     package's, not this one's.
//   - A request whose reply was lost may still run later (go-redis retries,
//     or a healed partition delivering it): a stale join can leave an entry
//     that expires after one TTL, delaying the queue by at most that.
//   - The client should set ContextTimeoutEnabled (go-redis option) so that
//     a stalled connection never blocks a renewal or Close beyond its
//     timeout; safety does not depend on it, liveness does.
package redis
