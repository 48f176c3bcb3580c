package rediscore

import (
	"context"
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector/internal/rediskit"
)

// Times inside the scripts are server microseconds from redis.call('TIME');
// numbers too large for Lua's "%.14g" conversion are written with fmt().

// Prelude begins every script of both backends: the server's clock, and
// number formatting.
const Prelude = `
if redis.replicate_commands then redis.replicate_commands() end
local function fmt(n) return string.format('%.0f', n) end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
`

// ViewScript is the script that reads a backend's leader view: viewLua
// defines leaderView, call is the Lua call of it with the script's KEYS.
//
// Reply: {now µs} or {now µs, id, address, token, since µs, remaining ms}
// (rediskit.ParseView).
func ViewScript(viewLua, call string) *redis.Script {
	return redis.NewScript(Prelude + viewLua + `
local v = ` + call + `
table.insert(v, 1, fmt(now))
return v
`)
}

// QueuedScript is the script that reports whether a live entry of
// candidate ARGV[1], other than the term's holder (KEYS[4], field entry),
// waits: it goes through the entries of the sorted set KEYS[set] (a Lua
// index), whose cand (KEYS[3]) names ARGV[1] and whose lease (KEYS[2])
// has not lapsed, and also must satisfy cond (Lua, of e; "" for none).
// Reply: 1 or 0.
func QueuedScript(set, cond string) *redis.Script {
	return redis.NewScript(Prelude + `
local holder = redis.call('HGET', KEYS[4], 'entry')
for _, e in ipairs(redis.call('ZRANGE', KEYS[` + set + `], 0, -1)) do
  local id = string.match(redis.call('HGET', KEYS[3], e) or '', '^([^\n]*)\n')
  local d = tonumber(redis.call('ZSCORE', KEYS[2], e) or '0')
  if e ~= holder and id == ARGV[1] and d > now` + cond + ` then return 1 end
end
return 0
`)
}

// Call runs script s on c with keys and args, tells p how the request went
// (rediskit.Patience), and returns its reply, or its error as classify
// classifies it.
func Call(ctx context.Context, s *redis.Script, c redis.Scripter, keys []string, p *rediskit.Patience, classify func(error) error, args ...any) (any, error) {
	v, err := s.Run(ctx, c, keys, args...).Result()
	p.Observe(err)
	if err != nil {
		return nil, classify(err)
	}
	return v, nil
}

// ReadView reads a leader view with a backend's view script s (Call; see
// ViewScript); a reply it cannot parse is a permanent error.
func ReadView(ctx context.Context, s *redis.Script, c redis.Scripter, keys []string, p *rediskit.Patience, classify func(error) error) (rediskit.View, error) {
	v, err := Call(ctx, s, c, keys, p, classify)
	if err != nil {
		return rediskit.View{}, err
	}
	r, err := rediskit.ParseView(v)
	if err != nil {
		return rediskit.View{}, rediskit.Permanent(err)
	}
	return r, nil
}

// StepHead decodes what both backends' step replies begin with, a reply
// of at least n fields: {status, wake ms, …, …, head, …}; wake < 0 is
// none. An error keeps the status read.
func StepHead(v any, n int) (a []any, status string, wake time.Duration, head string, err error) {
	a, ok := v.([]any)
	if !ok || len(a) < n {
		return nil, "", 0, "", fmt.Errorf("unexpected script reply %#v", v)
	}
	status, _ = a[0].(string)
	w, ok := a[1].(int64)
	if status == "" || !ok {
		return a, status, 0, "", fmt.Errorf("unexpected script reply %#v", v)
	}
	head, _ = a[4].(string)
	return a, status, time.Duration(w) * time.Millisecond, head, nil
}
