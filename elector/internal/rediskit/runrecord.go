package rediskit

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/redis/go-redis/v9"
)

// A --once-per run record is stored without a TTL, so that no eviction
// policy but allkeys-* may drop it (volatile-* evicts only keys with a TTL,
// and a record written with PX was the one key of an election such a policy
// could take). Its lapse is in its value instead: the record's JSON object
// gets a first member "server_expires_us", the server's TIME in
// microseconds at which its period ends, and every read compares it with
// TIME. A record whose value does not begin with that member (written with
// SET … PX by an electd before this format, or by another tool) is live for
// as long as the key exists, as before.

// runLua is shared by the run record's scripts: the server's clock, the
// lapse a stored value names (nil: none), and whether it is live.
const runLua = `
if redis.replicate_commands then redis.replicate_commands() end
local tm = redis.call('TIME')
local now = tonumber(tm[1]) * 1000000 + tonumber(tm[2])
local function lapse(v) return tonumber(string.match(v, '^{"server_expires_us":(%d+)')) end
local function live(v)
  local x = lapse(v)
  return not x or x > now
end
`

// recordRunScript stores a run record for a period.
//
// KEYS: the record. ARGV: the record's JSON object, the period in µs, and
// "nx" to leave a live record in place. Reply: 1 stored, 0 left in place.
var recordRunScript = redis.NewScript(runLua + `
if ARGV[3] == 'nx' then
  local v = redis.call('GET', KEYS[1])
  if v and live(v) then return 0 end
end
local rest = string.sub(ARGV[1], 2)
if rest ~= '}' then rest = ',' .. rest end
redis.call('SET', KEYS[1], '{"server_expires_us":' .. string.format('%.0f', now + tonumber(ARGV[2])) .. rest)
return 1
`)

// lastRunScript returns the live run record without its lapse, or nil; a
// lapsed one is deleted, so that an electd that predates this format, which
// reads a record without a TTL as live, no longer sees it either.
//
// KEYS: the record.
var lastRunScript = redis.NewScript(runLua + `
local v = redis.call('GET', KEYS[1])
if not v then return false end
if not live(v) then
  redis.call('DEL', KEYS[1])
  return false
end
return (string.gsub(v, '^{"server_expires_us":%d+,?', '{', 1))
`)

// RecordRun stores the run record b (a JSON object) in key for period,
// replacing any record there. In a pipeline (c is a redis.Pipeliner) it
// sends the whole script, as a server that lost its script cache (a
// restart, a failover) would refuse its hash.
func RecordRun(ctx context.Context, c redis.Scripter, key string, b []byte, period time.Duration) *redis.Cmd {
	return runRecord(ctx, c, key, b, period, "")
}

// RecordRunIfNone is RecordRun that leaves a live record in place.
func RecordRunIfNone(ctx context.Context, c redis.Scripter, key string, b []byte, period time.Duration) *redis.Cmd {
	return runRecord(ctx, c, key, b, period, "nx")
}

func runRecord(ctx context.Context, c redis.Scripter, key string, b []byte, period time.Duration, mode string) *redis.Cmd {
	if len(b) < 2 || b[0] != '{' {
		cmd := redis.NewCmd(ctx)
		cmd.SetErr(fmt.Errorf("run record %q is not a JSON object", b))
		return cmd
	}
	args := []any{string(b), period.Microseconds(), mode}
	if _, ok := c.(redis.Pipeliner); ok {
		return recordRunScript.Eval(ctx, c, []string{key}, args...)
	}
	return recordRunScript.Run(ctx, c, []string{key}, args...)
}

// LastRun returns the live run record in key (as RecordRun was given it),
// or redis.Nil.
func LastRun(ctx context.Context, c redis.Scripter, key string) ([]byte, error) {
	s, err := lastRunScript.Run(ctx, c, []string{key}).Text()
	if err != nil {
		return nil, err
	}
	return []byte(s), nil
}

// forgetRunScript deletes the run record: in a script, as every other
// command on the record, so that `electd lock --forget` needs no ACL
// permission beyond those electd has (DEL is in lastRunScript already).
//
// KEYS: the record. Reply: 1 deleted, 0 none there.
var forgetRunScript = redis.NewScript(`return redis.call('DEL', KEYS[1])`)

// ForgetRun deletes the run record in key, live or lapsed.
func ForgetRun(ctx context.Context, c redis.Scripter, key string) error {
	return forgetRunScript.Run(ctx, c, []string{key}).Err()
}

// EvictsUnexpiring reports whether a maxmemory-policy may evict keys
// without a TTL, as electd's are (the run record included).
func EvictsUnexpiring(policy string) bool { return strings.HasPrefix(policy, "allkeys-") }

// WarnRunEviction logs a warning, for every server of c (every master of a
// cluster), whose maxmemory-policy may evict a --once-per run record; a
// server that refuses CONFIG GET gets a debug line.
func WarnRunEviction(ctx context.Context, c redis.UniversalClient, log *slog.Logger) {
	check := func(ctx context.Context, node *redis.Client) error {
		addr := node.Options().Addr
		policy, err := maxmemoryPolicy(ctx, node)
		switch {
		case err != nil:
			log.Debug("cannot read maxmemory-policy to check that the --once-per run record cannot be evicted", "node", addr, "err", err)
		case EvictsUnexpiring(policy):
			log.Warn("redis may evict the --once-per run record under its maxmemory-policy, and the job would then run again within its period; set maxmemory-policy noeviction or a volatile-* policy (electd's keys carry no TTL)",
				"node", addr, "maxmemory-policy", policy)
		}
		return nil
	}
	switch cli := c.(type) {
	case *redis.ClusterClient:
		if err := cli.ForEachMaster(ctx, check); err != nil {
			log.Debug("cannot reach every master to check its maxmemory-policy", "err", err)
		}
	case *redis.Client:
		_ = check(ctx, cli) // check only logs
	}
}

func maxmemoryPolicy(ctx context.Context, node *redis.Client) (string, error) {
	m, err := node.ConfigGet(ctx, "maxmemory-policy").Result()
	if err != nil {
		return "", fmt.Errorf("config get maxmemory-policy: %w", err)
	}
	p, ok := m["maxmemory-policy"]
	if !ok {
		return "", errors.New("config get maxmemory-policy: no such setting")
	}
	return p, nil
}
