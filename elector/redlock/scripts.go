package redlock

import (
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/internal/rediscore"
	"github.com/electd/electd/elector/internal/rediskit"
)

// Times inside the script are the server's microseconds from
// redis.call('TIME') (rediscore.Prelude); each server keeps its leases on
// its own clock.

// stepScript is everything one server does for a candidate, atomically.
//
// KEYS: queue expiry cand term token born committed claims left server
// ARGV: mode (join|hold|withdraw|leave), entry, ttl ms, id, address,
// channel, order (leave: a switchover's target id, or empty), the highest token the caller has seen (may be empty),
// commit token (hold; withdraw: the failed commit's; leave: the handover
// token, the leaver's own + 1; may be empty), since µs (with it), claim
// ("1": the caller asks to be granted; "0": it only keeps its place).
//
// Every entry has a lease on this server (expiry, now + TTL at each step)
// and a place in its queue, scored by the candidate's order (the same on
// every server, so the queues agree). Entries that claim (a candidate
// claims while it reaches a majority) are also in claims, in the same
// order. The server grants its term to the caller when the caller is the
// first claiming entry, nobody holds the term, and
// its state is older than one TTL (the epoch: a server that lost its state
// grants nothing for one TTL). A grant is uncommitted until the candidate,
// having won a majority, commits its token to it (hold with commit): an
// uncommitted grant yields to a better claiming head (split votes resolve
// in the queue's order), a committed one lasts until its lease lapses or
// its holder leaves. A commit, or a handover, whose token is not above
// every token committed here before (committed: "token entry") is refused,
// unless it is that entry's own, or that entry withdrew it: a late one
// never lowers a token. The entry the last token was committed to takes
// the server back, when its lease here lapsed, before any other. "withdraw" drops the caller's uncommitted grant (or one
// committed with the commit token given), keeping its place.
//
// Reply: {status, wake ms, floor, now µs, head, mine, why, view...}: status is held
// (the caller holds the term here, committed with the commit token if one
// was given), young (free and the caller is first, but the state is
// younger than one TTL), taken (another candidate holds an uncommitted
// grant here: a split vote), wait, or left (a switchover's leave that
// handed the term over here: handed, to the target; passed, the target
// not live here, to the head); wake is how long until what keeps
// the caller from holding here may lapse (-1: nothing); mine is the token
// the caller's grant here is committed with ("" if none); why is why the
// state's epoch began, with status young (rediskit.EpochWhy); floor is the
// highest token this server knows, floored by its clock in µs; view... is
// the committed holder here (see viewLua). A change of the term or of the
// head publishes "<mode> <head>\n<view>" on the channel.
var stepScript = redis.NewScript(rediscore.Prelude + viewLua + rediskit.EpochLua + `
local Q, X, C, T, K, B, M, L, D = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6], KEYS[7], KEYS[8], KEYS[9]
local mode, me, ttl = ARGV[1], ARGV[2], tonumber(ARGV[3]) * 1000
local changed = false

local stored = tonumber(redis.call('GET', K) or '0') or 0
local seen = tonumber(ARGV[8])
if seen and seen > stored then
  stored = seen
  redis.call('SET', K, fmt(seen))
end
-- committed is "token entry": the highest token committed here, and the
-- entry it was committed to ("" once that entry withdrew it).
local cm = redis.call('GET', M) or '0'
local committed = tonumber(string.match(cm, '^(%d+)') or '0') or 0
local committer = string.match(cm, '^%d+ (.*)$') or ''
local function commitToken(tok, who)
  redis.call('SET', M, fmt(tok) .. ' ' .. who)
  committed, committer = tok, who
  if tok > stored then
    stored = tok
    redis.call('SET', K, fmt(tok))
  end
end

-- The epoch (rediskit.EpochLua): a server run younger than one TTL (a
-- restart, or a replica promoted in its place) or a record that vanished
-- means this state may have lost writes, so nothing is granted until one
-- TTL after it began. A name new to this server begins its epoch here:
-- the server may have missed the election's beginning (see EpochLua).
local born, bornWhy = epoch(KEYS[10], B, ttl, false, 0, false)

local function drop(e)
  if redis.call('ZREM', Q, e) == 1 then changed = true end
  redis.call('ZREM', L, e)
  redis.call('ZREM', X, e)
  redis.call('HDEL', C, e)
  if redis.call('HGET', T, 'entry') == e then
    redis.call('DEL', T)
    changed = true
  end
end

-- head is the first live claiming entry: the one a free term goes to.
local function head()
  while true do
    local h = redis.call('ZRANGE', L, 0, 0)[1]
    if not h then return '' end
    if redis.call('ZSCORE', X, h) and redis.call('ZSCORE', Q, h) then return h end
    drop(h)
  end
end

-- named is the entry a switchover handed the term to (leave), published
-- as the head so that its candidate alone is woken.
local named
local function finish(status, wake, young)
  local h = named or head()
  local mine = ''
  local t = redis.call('HMGET', T, 'entry', 'token')
  if t[1] == me and t[2] then mine = t[2] end
  local v = leaderView(X, T)
  table.insert(v, 1, fmt(now))
  if changed then
    redis.call('PUBLISH', ARGV[6], mode .. ' ' .. h .. ' ' .. me .. '\n' .. table.concat(v, '\n'))
  end
  local floor = stored
  if now > floor then floor = now end
  local reply = {status, wake, fmt(floor), fmt(now), h, mine, young or ''}
  for _, f in ipairs(v) do table.insert(reply, f) end
  return reply
end

-- Prune the dead: every entry whose lease has lapsed by this clock, and
-- the record of entries that left two TTLs ago.
for _, e in ipairs(redis.call('ZRANGEBYSCORE', X, '-inf', fmt(now))) do drop(e) end
-- (Only when there is one: a script's first write decides whether Redis
-- refuses it when out of memory, and a step that cannot renew must fail.)
if redis.call('ZRANGEBYSCORE', D, '-inf', fmt(now), 'LIMIT', 0, 1)[1] then
  redis.call('ZREMRANGEBYSCORE', D, '-inf', fmt(now))
end
local holder = redis.call('HGET', T, 'entry')
if holder and not (redis.call('ZSCORE', X, holder) and redis.call('ZSCORE', Q, holder)) then
  drop(holder)
end

if mode == 'leave' then
  -- A committed holder that leaves with a handover token (its own + 1)
  -- commits it to the next in line: the successor finds the term granted
  -- and committed on every server the handover reached, with one token.
  local t = redis.call('HMGET', T, 'entry', 'token')
  local handover = ARGV[9] ~= '' and t[1] == me and t[2] and t[2] ~= '' and
    tonumber(ARGV[9]) == tonumber(t[2]) + 1 and tonumber(ARGV[9]) > committed
  drop(me)
  -- A step of this entry that arrives later (a request held by the
  -- network) must not queue it again: it is refused for two TTLs.
  redis.call('ZADD', D, fmt(now + 2 * ttl), me)
  local status = 'left'
  if handover and now >= born + ttl then
    local h = head()
    -- A switchover (switchover.go) names its target's id in ARGV[7] (a
    -- leave has no order): the newest live claiming entry of that
    -- candidate (its latest arrival: an older one is a previous copy of
    -- it, crashed and lapsing) gets the term, 'handed'; else the head
    -- does, 'passed'.
    if ARGV[7] ~= '' then
      status = 'passed'
      for _, e in ipairs(redis.call('ZRANGE', L, 0, -1)) do
        local id = string.match(redis.call('HGET', C, e) or '', '^([^\n]*)\n')
        if id == ARGV[7] and redis.call('ZSCORE', X, e) and redis.call('ZSCORE', Q, e) then
          h, named, status = e, e, 'handed'
        end
      end
    end
    if h ~= '' then
      redis.call('HSET', T, 'entry', h, 'token', ARGV[9], 'since', ARGV[10])
      commitToken(tonumber(ARGV[9]), h)
      changed = true
    end
  end
  return finish(status, -1)
end
if mode == 'withdraw' then
  -- Only an uncommitted grant, or one committed with the token given (a
  -- commit that failed to reach a majority): a withdraw that arrives late
  -- never drops a later commit.
  local t = redis.call('HMGET', T, 'entry', 'token')
  if t[1] == me and (t[2] == '' or t[2] == ARGV[9]) then
    redis.call('DEL', T)
    changed = true
    if t[2] ~= '' and committer == me then commitToken(committed, '') end
  end
  return finish('wait', -1)
end

-- join or hold: (re)join with the candidate's order, and renew the lease;
-- not an entry that left.
if redis.call('ZSCORE', D, me) then return finish('left', -1) end
if not redis.call('ZSCORE', Q, me) then
  redis.call('ZADD', Q, ARGV[7], me)
  redis.call('HSET', C, me, ARGV[4] .. '\n' .. ARGV[5])
  changed = true
end
redis.call('ZADD', X, fmt(now + ttl), me)
if ARGV[11] == '1' then
  if redis.call('ZADD', L, ARGV[7], me) == 1 then changed = true end
elseif redis.call('ZREM', L, me) == 1 then
  changed = true
end

local h = head()
local t = redis.call('HMGET', T, 'entry', 'token')
-- The entry the last token here was committed to, renewing that term
-- (its lease here lapsed meanwhile), takes the server back before anyone.
local winner = h
if ARGV[9] ~= '' and tonumber(ARGV[9]) == committed and committer == me then winner = me end
-- An uncommitted grant yields to the winner: it is no term yet.
if t[1] and (t[2] == false or t[2] == '') and t[1] ~= winner then
  redis.call('DEL', T)
  changed = true
  t = {false, false}
end
if not t[1] and winner == me and now >= born + ttl then
  redis.call('HSET', T, 'entry', me, 'token', '')
  changed = true
  t = {me, ''}
end

if t[1] == me then
  local commit = ARGV[9]
  if commit ~= '' then
    if t[2] == '' or tonumber(commit) > tonumber(t[2]) then
      -- A candidacy commits a later token over its own earlier one (a
      -- commit that reached no majority, withdrawn or not); never one
      -- that is not above every token committed here (a late request).
      -- Equal only for the entry it was committed to, or once withdrawn.
      local c = tonumber(commit)
      if c < committed or (c == committed and committer ~= me and committer ~= '') then
        return finish('wait', -1)
      end
      redis.call('HSET', T, 'token', commit, 'since', ARGV[10])
      commitToken(c, me)
      changed = true
    elseif t[2] ~= commit then
      return finish('wait', -1) -- a late commit of an older token: not this term
    end
  end
  return finish('held', -1)
end

local deadline
if t[1] then
  deadline = tonumber(redis.call('ZSCORE', X, t[1]) or fmt(now + ttl))
  if t[2] == '' then
    return finish('taken', math.ceil((deadline - now) / 1000))
  end
elseif h ~= me then
  -- Behind a claiming entry: until the one just ahead may lapse. Not
  -- claiming: nothing to wait for here.
  local r = redis.call('ZRANK', L, me)
  if not r then return finish('wait', -1) end
  local ahead = redis.call('ZRANGE', L, r - 1, r - 1)[1]
  deadline = tonumber(redis.call('ZSCORE', X, ahead) or fmt(now + ttl))
else
  return finish('young', math.ceil((born + ttl - now) / 1000), bornWhy)
end
return finish('wait', math.ceil((deadline - now) / 1000))
`)

// viewLua defines leaderView(X, T): this server's committed, live term
// holder, read-only: {} or {id, address, token, since µs, remaining ms}.
const viewLua = `
local function leaderView(X, T)
  local t = redis.call('HMGET', T, 'entry', 'token', 'since')
  if not t[1] or not t[2] or t[2] == '' then return {} end
  local d = redis.call('ZSCORE', X, t[1])
  if not d or tonumber(d) <= now then return {} end
  local id, addr = string.match(redis.call('HGET', KEYS[3], t[1]) or '', '^([^\n]*)\n(.*)$')
  return {id or t[1], addr or '', t[2], t[3] or '0', math.ceil((tonumber(d) - now) / 1000)}
end
`

// viewScript reads one server's leader view (see viewLua) and the server
// time it was read at.
//
// KEYS: queue expiry cand term token born (as stepScript)
// Reply: {now µs} or {now µs, id, address, token, since µs, remaining ms}.
var viewScript = rediscore.ViewScript(viewLua, "leaderView(KEYS[2], KEYS[4])")

// stepReply is a decoded stepScript reply.
type stepReply struct {
	status string
	wake   time.Duration // < 0: none
	floor  uint64
	at     time.Time // the server's time
	head   string
	mine   uint64 // the token our grant here is committed with; 0: none
	young  string // with status young: why the state's epoch began
	view   rediskit.View
}

func parseStep(v any) (stepReply, error) {
	a, status, wake, head, err := rediscore.StepHead(v, 8)
	r := stepReply{status: status, wake: wake, head: head}
	if err != nil {
		return r, err
	}
	if r.floor, err = rediskit.ParseUint(a[2]); err != nil {
		return r, fmt.Errorf("bad token floor in script reply: %w", err)
	}
	us, err := rediskit.ParseUint(a[3])
	if err != nil {
		return r, fmt.Errorf("bad time in script reply: %w", err)
	}
	r.at = time.UnixMicro(int64(us))
	if m, _ := a[5].(string); m != "" {
		if r.mine, err = strconv.ParseUint(m, 10, 64); err != nil {
			return r, fmt.Errorf("bad committed token in script reply: %w", err)
		}
	}
	r.young, _ = a[6].(string)
	if r.view, err = rediskit.ParseView(a[7:]); err != nil {
		return r, err
	}
	return r, nil
}
