package rediskit

import (
	"log/slog"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"
)

// The epoch rule, shared by the Redis and Redlock step scripts.
//
// A server that may have lost acknowledged writes may have lost a grant or
// a renewal whose lease is still valid by its holder's clock, so it grants
// no term until one TTL after the loss could have happened: every lease it
// acknowledged before then has lapsed by then. The loss is possible where
// the server's run changed (a restart: INFO run_id; a promotion: the
// replication history, master_replid), where the state is older than what
// a candidate saw (a restored snapshot: a token or a step later than the
// state records), or where a record that existed is gone (keys deleted,
// flushed or evicted). A name never used before is none of these.
//
// So each database keeps one server record, ServerKey (electd:server:dbN):
// the run it saw
// ("run_id master_replid"), when electd first saw that run (at, server µs),
// why that epoch began, the latest step of any election (last), and every
// election that has had state there (a field named after the election's
// born key). Each election keeps its own born record (at, run, last, why).
// An election's epoch begins:
//
//   - when the server record's does: at the first step after the record
//     was missing (a restart, a flush, a deletion or eviction of the
//     record, the first use of the database), named another run, or was
//     older than a step a candidate saw answered;
//   - at the step where the election's own state lost writes (lost: its
//     caller saw a token or a step later than it records), or where its
//     born record is missing although the server record knows the name
//     (vanished);
//   - for a name the server record does not know, and whose born record is
//     missing, when the server record's epoch began: the name is new. But
//     on a server of a quorum (Redlock: known false) at that step: the
//     server may have missed the election's beginning (its candidates
//     could not reach it), and taking the name for new there would let one
//     other server whose state went back make a quorum.
//
// The server record is written in the same script as every election's
// state, so a name whose state existed under the record is in it. Only
// the loss of the whole server record (with its names) cannot be told
// from a first use; it starts an epoch, and every election waits.
// Under Redis Cluster a script may only touch its election's slot, so the
// "server" record is the election's own (ServerKey): there a new name
// still waits one TTL. The record's key names its database, so that a
// database swapped in (SWAPDB) or keys moved from another (MOVE) bring no
// record this database's steps read: they begin an epoch.
//
// Not detected (the same limit as for every election's own state): state
// restored under the same run, such as a snapshot reloaded by DEBUG RELOAD
// or a process restored, shows only through lost writes a candidate saw;
// for a name the snapshot predates, a candidate that never stepped is
// granted at once. An election whose keys are deleted while only copies
// of an electd older than the server record stepped in it (a rolling
// upgrade) looks new to the record.

// EpochLua defines epoch(S, B, ttl, lost, stepped, known) for a step script,
// after a prelude that defines now (server µs) and fmt. S is the server
// record's key, B the election's born key, ttl in µs, lost whether the
// caller already found that the election's state lost writes (a token),
// stepped the latest server time (µs, 0: none) of a step of the caller's
// own that was answered, known whether a name the server record does not
// know is new (false on a server of a quorum: its epoch begins at this
// step). It records the step in both records and returns
// when the election's epoch began (server µs) and why (see EpochWhy).
const EpochLua = `
local function epoch(S, B, ttl, lost, stepped, known)
  local info = redis.call('INFO', 'server')
  local id = string.match(info, 'run_id:(%x+)') or ''
  local run = id .. ' ' .. (string.match(redis.call('INFO', 'replication'), 'master_replid:(%x+)') or '')
  local s = redis.call('HMGET', S, 'run', 'at', 'why', 'last', B)
  local sat, swhy, slast = tonumber(s[2]), s[3] or '', tonumber(s[4]) or 0
  local snew
  if not sat then
    snew = 'unrecorded'
  elseif s[1] ~= run then
    snew = 'run'
  elseif stepped > slast then
    snew = 'lost'
  end
  -- (uptime only names the cause: a process younger than one TTL restarted)
  local up = tonumber(string.match(info, 'uptime_in_seconds:(%d+)') or '')
  if snew and snew ~= 'lost' and up and up * 1000000 < ttl then snew = 'restarted' end
  if snew then
    sat, swhy = now, snew
    redis.call('HSET', S, 'run', run, 'at', fmt(now), 'why', snew)
  end
  redis.call('HSET', S, 'last', fmt(math.max(slast, now, stepped)))
  if not s[5] then redis.call('HSET', S, B, fmt(now)) end

  local b = redis.call('HMGET', B, 'at', 'run', 'last', 'why')
  local at, blast = tonumber(b[1]), tonumber(b[3]) or 0
  local born, why = at, b[4] or swhy
  if stepped > blast then lost = true end
  if lost then
    born, why = now, 'lost'
  elseif not at then
    if s[5] then
      born, why = now, 'vanished'
    elseif known or snew then
      born, why = sat, swhy
    else
      born, why = now, 'unknown'
    end
  elseif b[2] ~= run or at < sat then
    born, why = sat, swhy
  end
  if born ~= at or b[2] ~= run or why ~= b[4] then
    redis.call('HSET', B, 'at', fmt(born), 'run', run, 'why', why)
  end
  redis.call('HSET', B, 'last', fmt(math.max(blast, now, stepped)))
  return born, why
end
`

// ServerKey is the key of the server record (see EpochLua) for the
// election whose keys begin with prefix: one per database, but under
// Redis Cluster, where a script may only touch its election's slot, the
// election's own.
func ServerKey(c redis.UniversalClient, prefix string) string {
	if _, ok := c.(*redis.ClusterClient); ok {
		return prefix + "server"
	}
	return ServerKeyIn(DB(c))
}

// ServerKeyIn is the key of the server record of database db (outside
// Redis Cluster). It names the database, so that a record swapped in from
// another (SWAPDB, MOVE) is not read as this database's.
func ServerKeyIn(db int) string { return "electd:server:db" + strconv.Itoa(db) }

// EpochWhy says in words why an epoch began, from the reason the step
// scripts return.
func EpochWhy(code string) string {
	switch code {
	case "restarted":
		return "the Redis server restarted less than one ttl ago"
	case "run":
		return "the Redis server is another run than the state recorded (another run_id or master_replid: a failover to a replica, a failback, a restart that kept its data, or a master that lost its replicas for repl-backlog-ttl)"
	case "unrecorded":
		return "the database has no record of electd's state (its first use by electd, under Redis Cluster this election's first use; or the record was flushed, deleted or evicted)"
	case "lost":
		return "the state lost writes a candidate saw (an older state was restored: it lacks a token or a step that was answered)"
	case "unknown":
		return "this server of the quorum has no record of the election (a name new to it: it may have missed the election's beginning)"
	case "vanished":
		return "this election's state vanished although the server knew it (its keys were deleted, flushed or evicted)"
	}
	return "the state's epoch began (" + code + ")"
}

// EpochWaitMsg is the message of LogEpochWait's line.
const EpochWaitMsg = "waiting: the store grants no term until one ttl after the state may have lost writes"

// LogEpochWait logs, at INFO, that a campaign waits for the epoch: no term
// is granted until left from now, and why.
func LogEpochWait(log *slog.Logger, code string, left time.Duration, now time.Time, args ...any) {
	args = append(args, "why", EpochWhy(code), "until", now.Add(left).UTC().Format(time.RFC3339Nano), "left", left.Round(time.Millisecond))
	log.Info(EpochWaitMsg, args...)
}
