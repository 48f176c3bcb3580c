package redis

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// The scripts begin with rediscore.Prelude: the server's clock (µs) and
// number formatting.

// stepScript joins, renews, grants, leaves and prunes.
//
// KEYS: queue expiry cand term seq token born slots holders server
// ARGV: mode (join|try|wait|hold|leave|handto), entry, ttl ms, id, address,
// channel, token (hold), an older entry of this candidate to drop first (may
// be empty), slots (empty: 1), the highest token the caller has seen (may be
// empty), the latest server time of a step of the caller's own that was
// answered (µs, may be empty), "1" if a grant counts only once replicas have
// it (pending until its holder renews it), and for handto the ID of the
// candidate to hand the term to.
//
// Reply: {status, wake ms, token, since µs, head, young, view...} where
// status is leader|wait|gone|lost|left|notqueued|busy|slots and wake is how
// long until whatever keeps this waiter from leading may lapse by the
// server's clock (-1: nothing to wait for); young is why the state's epoch
// began when only the epoch keeps this waiter back (wake is then its end),
// else "". "try" is "join" that leaves again at once (busy) unless the
// entry can hold, or is kept waiting only by the state's first TTL. "slots"
// refuses a join whose slot count differs from the queue's (returned in the
// token field).
//
// With one slot the term is the HASH term. With N > 1 slots, the holders are
// the HASH holders (entry → "token since"); they are always among the first
// N entries of the queue, since grants go in queue order and entries only
// leave from in front of a holder. Every grant to another entry publishes
// "grant <entry>", which wakes that entry alone. view... is the leader view
// after the step (see viewScript's reply), so every renewal also keeps the
// Elector's view current without a read of its own.
var stepScript = redis.NewScript(rediscore.Prelude + viewLua + rediskit.EpochLua + `
local Q, X, C, T, S, K, B, NS, H = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local mode, me, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]) * 1000
local N = tonumber(ARGV[9]) or 1
-- A grant whose reply counts only once replicas have it (ARGV[12], under
-- Sentinel) is pending until its holder's first renewal: the leader view
-- names no pending holder, which may never learn that it leads.
local pending = ''
if ARGV[12] == '1' then pending = ' p' end
local changed = false
local granted = {}

-- The stored token never falls below one a candidate has seen: after a
-- state loss the new server's TIME floors it, and that clock may lag. A
-- token seen above the stored one proves that this state lost writes (it
-- issued that token, or another state did and this one replaced it).
local seen = tonumber(ARGV[10])
local lost = seen and seen > (tonumber(redis.call('GET', KEYS[6]) or '0') or 0)
if lost then redis.call('SET', KEYS[6], fmt(seen)) end

-- The state's epoch (rediskit.EpochLua): a server run younger than one
-- TTL (a restart, or a promotion: master_replid), a record that vanished
-- or lost writes (above, or a step of the caller's answered later than the
-- state records) mean whatever this state says may be incomplete, so no
-- term is granted until one TTL after it began. A name new to the server
-- begins with the server's record of its run. young is why, when the
-- reply waits for the epoch alone.
local born, bornWhy = epoch(KEYS[10], B, ttl, lost, tonumber(ARGV[11]) or 0, true)
local young = ''

local function drop(e)
  if redis.call('ZREM', Q, e) == 1 then changed = true end
  redis.call('ZREM', X, e)
  redis.call('HDEL', C, e)
  redis.call('HDEL', NS, e)
  if redis.call('HDEL', H, e) == 1 then changed = true end
  if redis.call('HGET', T, 'entry') == e then
    redis.call('DEL', T)
    changed = true
  end
end

local function head()
  while true do
    local h = redis.call('ZRANGE', Q, 0, 0)[1]
    if not h then return '' end
    if redis.call('ZSCORE', X, h) then return h end
    drop(h)
  end
end

local function nextToken()
  local tok = (tonumber(redis.call('GET', K) or '0') or 0) + 1
  if now > tok then tok = now end
  redis.call('SET', K, fmt(tok))
  return tok
end

-- promoteSlots grants free slots to the first entries of the queue that do
-- not hold one, once the state is older than one TTL.
local function promoteSlots()
  if now < born + ttl then return end
  local n = redis.call('HLEN', H)
  if n >= N then return end
  head()
  for _, e in ipairs(redis.call('ZRANGE', Q, 0, N - 1)) do
    if n >= N then break end
    if redis.call('HEXISTS', H, e) == 0 and redis.call('ZSCORE', X, e) then
      redis.call('HSET', H, e, fmt(nextToken()) .. ' ' .. fmt(now) .. pending)
      n = n + 1
      changed = true
      if e ~= me then table.insert(granted, e) end
    end
  end
end

-- promote grants the term to the head when nobody holds it and the state
-- is older than one TTL; whichever script runs first does it.
local function promote()
  if N > 1 then return promoteSlots() end
  if redis.call('EXISTS', T) == 1 or now < born + ttl then return end
  local h = head()
  if h == '' then return end
  local id, addr = string.match(redis.call('HGET', C, h) or '', '^([^\n]*)\n(.*)$')
  local tok = nextToken()
  redis.call('HSET', T, 'entry', h, 'id', id or h, 'address', addr or '', 'token', fmt(tok), 'since', fmt(now))
  if pending ~= '' then redis.call('HSET', T, 'pending', '1') end
  changed = true
end

local function finish(status, wake, tok, since)
  local h = head()
  local v = leaderView(Q, X, T, C, H)
  table.insert(v, 1, fmt(now))
  if changed then
    redis.call('PUBLISH', ARGV[6], mode .. ' ' .. h .. '\n' .. table.concat(v, '\n'))
  end
  for _, e in ipairs(granted) do redis.call('PUBLISH', ARGV[6], 'grant ' .. e) end
  local reply = {status, wake, tok or '', since or '', h, young}
  for _, f in ipairs(v) do table.insert(reply, f) end
  return reply
end

-- Prune the dead: every candidate whose deadline has passed by this clock.
for _, e in ipairs(redis.call('ZRANGEBYSCORE', X, '-inf', fmt(now))) do drop(e) end
local holder = redis.call('HGET', T, 'entry')
if holder and not (redis.call('ZSCORE', X, holder) and redis.call('ZSCORE', Q, holder)) then
  drop(holder)
end
if N > 1 then
  for _, e in ipairs(redis.call('HKEYS', H)) do
    if not (redis.call('ZSCORE', X, e) and redis.call('ZSCORE', Q, e)) then drop(e) end
  end
end
if ARGV[8] ~= '' then drop(ARGV[8]) end

if mode == 'leave' then
  drop(me)
  promote()
  return finish('left', -1)
end

-- A switchover (switchover.go): the holder leaves, and the newest live
-- entry of candidate ARGV[13] (its latest arrival: an older one is that
-- candidate's previous copy, crashed and lapsing) takes the holder's place
-- at the head before the grant, so the entries it passes (an older entry
-- of its own among them) keep their order, behind it. Without such an
-- entry (or a term of ours) it is a plain leave, 'notqueued'.
if mode == 'handto' then
  local target
  if N == 1 and redis.call('HGET', T, 'entry') == me then
    for _, e in ipairs(redis.call('ZRANGE', Q, 0, -1)) do
      local id = string.match(redis.call('HGET', C, e) or '', '^([^\n]*)\n')
      if e ~= me and id == ARGV[13] and redis.call('ZSCORE', X, e) then
        target = e
      end
    end
  end
  if target then redis.call('ZADD', Q, redis.call('ZSCORE', Q, me), target) end
  drop(me)
  promote()
  if not target then return finish('notqueued', -1) end
  return finish('left', -1)
end

if not redis.call('ZSCORE', Q, me) then
  if mode ~= 'join' and mode ~= 'try' then
    redis.call('ZREM', X, me)
    redis.call('HDEL', C, me)
    promote()
    return finish('gone', -1)
  end
  -- Every entry of the queue was checked against the head when it joined,
  -- so the head's slot count is the queue's.
  local h = head()
  if h ~= '' then
    local theirs = tonumber(redis.call('HGET', NS, h) or '1') or 1
    if theirs ~= N then return finish('slots', -1, fmt(theirs)) end
  end
  redis.call('ZADD', Q, redis.call('INCR', S), me)
  redis.call('HSET', C, me, ARGV[4] .. '\n' .. ARGV[5])
  if N > 1 then redis.call('HSET', NS, me, fmt(N)) end
end

if N > 1 then
  if mode == 'hold' then
    local v = redis.call('HGET', H, me) or ''
    local tok = string.match(v, '^(%d+) ')
    if tok ~= ARGV[7] then return finish('lost', -1) end
    if string.find(v, ' p$') then
      redis.call('HSET', H, me, string.sub(v, 1, -3))
      changed = true
    end
    redis.call('ZADD', X, fmt(now + ttl), me)
    return finish('leader', -1, tok)
  end
  redis.call('ZADD', X, fmt(now + ttl), me)
  promote()
  local tok, since = string.match(redis.call('HGET', H, me) or '', '^(%d+) (%d+)')
  if tok then return finish('leader', -1, tok, since) end
  -- Waiting. Within the first N entries only the state's first TTL keeps us
  -- back. The first waiter waits for the earliest holder's deadline; the
  -- others for that of the entry just ahead (which, if it lapses, makes
  -- them first waiter), so a crash wakes one waiter.
  local r = redis.call('ZRANK', Q, me)
  if r < N then
    young = bornWhy
    return finish('wait', math.ceil((born + ttl - now) / 1000))
  end
  if mode == 'try' then
    drop(me)
    return finish('busy', -1)
  end
  local deadline
  if r == N then
    for _, e in ipairs(redis.call('ZRANGE', Q, 0, N - 1)) do
      local d = tonumber(redis.call('ZSCORE', X, e) or fmt(now + ttl))
      if not deadline or d < deadline then deadline = d end
    end
  else
    local ahead = redis.call('ZRANGE', Q, r - 1, r - 1)[1]
    deadline = tonumber(redis.call('ZSCORE', X, ahead) or fmt(now + ttl))
  end
  return finish('wait', math.ceil((deadline - now) / 1000))
end

if mode == 'hold' then
  local t = redis.call('HMGET', T, 'entry', 'token')
  if t[1] ~= me or t[2] ~= ARGV[7] then return finish('lost', -1) end
  if redis.call('HDEL', T, 'pending') == 1 then changed = true end
  redis.call('ZADD', X, fmt(now + ttl), me)
  return finish('leader', -1, t[2])
end

redis.call('ZADD', X, fmt(now + ttl), me)
promote()
local t = redis.call('HMGET', T, 'entry', 'token', 'since')
if t[1] == me then return finish('leader', -1, t[2], t[3]) end

-- Waiting: until the candidate ahead of us lapses, or, at the head, the
-- holder's lease or the state's first TTL.
local h = head()
if mode == 'try' and (h ~= me or t[1]) then
  drop(me)
  return finish('busy', -1)
end
local deadline = born + ttl
if h ~= me then
  local r = redis.call('ZRANK', Q, me)
  local ahead = redis.call('ZRANGE', Q, r - 1, r - 1)[1]
  deadline = tonumber(redis.call('ZSCORE', X, ahead) or fmt(now + ttl))
elseif t[1] then
  deadline = tonumber(redis.call('ZSCORE', X, t[1]) or fmt(now + ttl))
else
  young = bornWhy
end
return finish('wait', math.ceil((deadline - now) / 1000))
`)

// viewLua defines leaderView(Q, X, T, C, H): the live term holder, read-only;
// for a semaphore, the holder first in line. A pending grant (one whose
// holder has not renewed it yet, under Sentinel: its WAIT may have failed,
// and then its candidate does not lead) is no holder. It returns {} or {id, address,
// token, since µs, remaining ms}. Both the view script and every message the
// step script publishes carry it, so watchers learn a change without a read.
const viewLua = `
local function leaderView(Q, X, T, C, H)
  local t = redis.call('HMGET', T, 'entry', 'id', 'address', 'token', 'since', 'pending')
  if t[6] then return {} end
  if not t[1] then
    local n = redis.call('HLEN', H)
    if n == 0 then return {} end
    for _, e in ipairs(redis.call('ZRANGE', Q, 0, n - 1)) do
      local v = redis.call('HGET', H, e)
      local d = redis.call('ZSCORE', X, e)
      if v and d and tonumber(d) > now and not string.find(v, ' p$') then
        local tok, since = string.match(v, '^(%d+) (%d+)')
        local id, addr = string.match(redis.call('HGET', C, e) or '', '^([^\n]*)\n(.*)$')
        return {id or e, addr or '', tok, since, math.ceil((tonumber(d) - now) / 1000)}
      end
    end
    return {}
  end
  local d = redis.call('ZSCORE', X, t[1])
  if not d or tonumber(d) <= now or not redis.call('ZSCORE', Q, t[1]) then return {} end
  return {t[2] or '', t[3] or '', t[4] or '', t[5] or '', math.ceil((tonumber(d) - now) / 1000)}
end
`

// viewScript reads the leader view (see viewLua) and the server time it was
// read at.
//
// KEYS: queue expiry term cand holders
// Reply: {now µs} or {now µs, id, address, token, since µs, remaining ms}.
var viewScript = rediscore.ViewScript(viewLua, "leaderView(KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5])")

// stepReply is a decoded stepScript reply.
type stepReply struct {
	status string
	wake   time.Duration // < 0: none
	token  uint64
	since  time.Time
	head   string
	// theirSlots is the queue's slot count, for status "slots".
	theirSlots int
	// young is why the state's epoch began (rediskit.EpochWhy), when only
	// the epoch keeps this waiter back until wake; "" otherwise.
	young string
	// view is the leader view after the step; viewErr says why it could
	// not be read (the step itself stands: the view only informs).
	view    rediskit.View
	viewErr error
}

func parseStep(v any) (stepReply, error) {
	a, status, wake, head, err := rediscore.StepHead(v, 7)
	r := stepReply{status: status, wake: wake, head: head}
	if err != nil {
		return r, err
	}
	r.view, r.viewErr = rediskit.ParseView(a[6:])
	r.young, _ = a[5].(string)
	if r.status == "slots" {
		n, err := rediskit.ParseUint(a[2])
		if err != nil {
			return r, fmt.Errorf("bad slot count in script reply: %w", err)
		}
		r.theirSlots = int(n)
		return r, nil
	}
	if r.status != "leader" {
		return r, nil
	}
	if r.token, err = rediskit.ParseUint(a[2]); err != nil {
		return r, fmt.Errorf("bad token in script reply: %w", err)
	}
	if s, ok := a[3].(string); ok && s != "" {
		us, err := rediskit.ParseUint(s)
		if err != nil {
			return r, fmt.Errorf("bad since in script reply: %w", err)
		}
		r.since = time.UnixMicro(int64(us))
	}
	return r, nil
}
