package rediskit

import (
	"context"
	"fmt"
	"strconv"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
)

// lineScript reads an election's line, read-only (`electd status`): the
// live entries of the queue in order, each with its candidate, deadline
// and, for a holder, its term. Both Redis backends keep the same four
// structures (queue: entry → order, expiry: entry → deadline µs, cand:
// entry → "id\naddress", term: entry, token, since); a semaphore (the
// single-server backend) adds holders (entry → "token since") and slots
// (entry → N). A term whose token is "" is not committed (Redlock) and
// does not hold, nor does a pending grant (under Sentinel, until its
// holder's first renewal: term's pending field, a holder's " p" suffix).
//
// KEYS: queue expiry cand term [holders slots]
// Reply: {now µs, the head's slot count or "", then for each live entry:
// entry, order, id, address, deadline µs, token or "", since µs or ""}.
var lineScript = redis.NewScript(`
local function fmt(n) return string.format('%.0f', n) end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local Q, X, C, T, H, NS = KEYS[1], KEYS[2], KEYS[3], KEYS[4], KEYS[5], KEYS[6]
local t = redis.call('HMGET', T, 'entry', 'token', 'since', 'pending')
local out = {fmt(now), ''}
local q = redis.call('ZRANGE', Q, 0, -1, 'WITHSCORES')
for i = 1, #q, 2 do
  local e = q[i]
  local d = tonumber(redis.call('ZSCORE', X, e) or '0')
  if d > now then
    if out[2] == '' and NS then out[2] = redis.call('HGET', NS, e) or '1' end
    local id, addr = string.match(redis.call('HGET', C, e) or '', '^([^\n]*)\n(.*)$')
    local tok, since
    if H then tok, since = string.match(redis.call('HGET', H, e) or '', '^(%d+) (%d+)$') end
    if not tok and t[1] == e and t[2] and t[2] ~= '' and not t[4] then tok, since = t[2], t[3] end
    for _, f in ipairs({e, fmt(tonumber(q[i + 1])), id or e, addr or '', fmt(d), tok or '', since or ''}) do
      table.insert(out, f)
    end
  end
end
return out
`)

// Line is an election's line as one server holds it.
type Line struct {
	At      time.Time // the server's time of the reading
	Slots   int       // the head's slot count; 0 when the server keeps none
	Entries []Entry
}

// Entry is one live entry of a Line.
type Entry struct {
	Entry, ID, Address string
	Order              uint64
	Deadline           time.Time // the server's clock
	Token              uint64    // 0: holds no (committed) term
	Since              time.Time
}

// Queued is e as elector.Queued, its deadline carried over to this host's
// clock by the server's reading of its own time (at) and ours (now).
func (e Entry) Queued(at, now time.Time) elector.Queued {
	return elector.Queued{ID: e.ID, Address: e.Address, Order: e.Order, Holder: e.Token != 0,
		Token: e.Token, Since: e.Since, Expires: now.Add(e.Deadline.Sub(at))}
}

// ReadLine reads the line in keys (queue expiry cand term, and for a
// semaphore holders slots) in one script call.
func ReadLine(ctx context.Context, c redis.Scripter, keys ...string) (Line, error) {
	v, err := lineScript.Run(ctx, c, keys).StringSlice()
	if err != nil {
		return Line{}, err
	}
	l, err := parseLine(v)
	if err != nil {
		return Line{}, Permanent(err)
	}
	return l, nil
}

func parseLine(f []string) (Line, error) {
	const per = 7
	if len(f) < 2 || (len(f)-2)%per != 0 {
		return Line{}, fmt.Errorf("line reply has %d fields", len(f))
	}
	num := func(s string) (uint64, error) {
		if s == "" {
			return 0, nil
		}
		return strconv.ParseUint(s, 10, 64)
	}
	var l Line
	at, err := num(f[0])
	if err != nil {
		return l, fmt.Errorf("bad time in line reply: %w", err)
	}
	l.At = time.UnixMicro(int64(at))
	slots, err := num(f[1])
	if err != nil {
		return l, fmt.Errorf("bad slot count in line reply: %w", err)
	}
	l.Slots = int(slots)
	for r := f[2:]; len(r) > 0; r = r[per:] {
		e := Entry{Entry: r[0], ID: r[2], Address: r[3]}
		var n [4]uint64
		for i, s := range []string{r[1], r[4], r[5], r[6]} {
			if n[i], err = num(s); err != nil {
				return l, fmt.Errorf("bad number in line reply for entry %q: %w", r[0], err)
			}
		}
		e.Order, e.Deadline, e.Token = n[0], time.UnixMicro(int64(n[1])), n[2]
		if n[3] != 0 {
			e.Since = time.UnixMicro(int64(n[3]))
		}
		l.Entries = append(l.Entries, e)
	}
	return l, nil
}
