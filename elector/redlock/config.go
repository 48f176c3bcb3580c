package redlock

import (
	"fmt"
	"time"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediskit"
)

// Server is one of the independent Redis servers of a quorum.
type Server struct {
	// Addr names the server in logs, metrics and /healthz (host:port).
	Addr string
	// Client is the connection to it. The caller owns it: Close does not
	// close it. Set ContextTimeoutEnabled on it (see redis.ClientOptions).
	Client redis.UniversalClient
}

// Config configures one candidate in one election.
type Config struct {
	// Servers are the independent Redis servers, at least three, each
	// holding its own copy of the election: a term needs a majority of
	// them. Every candidate of an election must name the same servers.
	Servers []Server
	// Candidate is the candidate: election, id, address, timing, clock,
	// logger and instrument. Slots must be 1 (see the package
	// documentation, "No semaphores").
	elector.Candidate
}

// MinServers is the fewest servers a quorum takes: with two, a majority is
// both, and no server may fail.
const MinServers = 3

// validate checks cfg and returns it with defaults filled in.
func (cfg Config) validate() (Config, error) {
	if len(cfg.Servers) < MinServers {
		return cfg, elector.Configf("store", "a redlock quorum needs at least %d independent servers, got %d (with two, a majority is both and no server may fail; for one, use redis://)", MinServers, len(cfg.Servers))
	}
	seen := map[string]bool{}
	for i, s := range cfg.Servers {
		if s.Client == nil {
			return cfg, elector.Configf("store", "redlock server %d (%s) has no client", i+1, s.Addr)
		}
		if seen[s.Addr] {
			return cfg, elector.Configf("store", "redlock server %s is named twice: a quorum needs distinct servers", s.Addr)
		}
		seen[s.Addr] = true
	}
	if cfg.Slots > 1 {
		return cfg, elector.Configf("slots", "%d slots: a semaphore over a quorum is not sound (with 3 servers and 2 slots, 3 holders can each hold a majority: a,b on one server, b,c on the next, a,c on the third); use slots 1 on redlock://, or a single Redis (redis://) or etcd for --slots", cfg.Slots)
	}
	c, err := cfg.Candidate.Validate()
	if err != nil {
		return cfg, err
	}
	cfg.Candidate = c
	return cfg, nil
}

// keys are the Redis keys of one election, the same on every server. They
// are apart from the single-server backend's (electd:{NAME}:rl:…): a
// quorum's state is not a single server's.
type keys struct {
	queue   string // ZSET entry → candidate's order
	expiry  string // ZSET entry → lease deadline, server µs
	cand    string // HASH entry → "id\naddress"
	term    string // HASH entry, token ("" until committed), since
	token   string // STRING highest token
	born    string // HASH at (server µs), run, why: when and why this state's epoch began; last: latest step
	commit  string // STRING highest token committed (or handed over) here
	claims  string // ZSET entry → order, of the entries that claim
	left    string // ZSET entry → µs: entries that left, refused until then
	lastRun string // STRING once-per-period run record, lapsing by the server's clock
	channel string // pub/sub channel (not a key)
	server  string // the server record of the epoch rule (rediskit.EpochLua)
}

// keysIn are the keys of election in database db (the same on every
// server): the same names in every database, but the channel, which is
// server-wide, names the database.
func keysIn(election string, db int) keys {
	k := keysFor(election)
	k.channel = rediskit.Channel(keyPrefix(election), db)
	k.server = rediskit.ServerKeyIn(db)
	return k
}

// keysFor are the keys of election in database 0.
func keysFor(election string) keys {
	p := keyPrefix(election)
	return keys{
		queue:   p + "queue",
		expiry:  p + "expiry",
		cand:    p + "cand",
		term:    p + "term",
		token:   p + "token",
		born:    p + "born",
		commit:  p + "committed",
		claims:  p + "claims",
		left:    p + "left",
		lastRun: p + "lastrun",
		channel: rediskit.Channel(p, 0),
		server:  rediskit.ServerKeyIn(0),
	}
}

func keyPrefix(election string) string { return "electd:{" + election + "}:rl:" }

// all lists the election's keys in the order the scripts expect them.
func (k keys) all() []string {
	return []string{k.queue, k.expiry, k.cand, k.term, k.token, k.born, k.commit, k.claims, k.left}
}

// step lists the step script's keys: the election's, then the server
// record.
func (k keys) step() []string { return append(k.all(), k.server) }

// order is a candidacy's place in every server's queue: its start in
// microseconds of this host's wall clock, the same on every server, so the
// queues agree. A host whose clock is behind queues earlier: fairness, not
// safety, rests on the clocks.
func order(t time.Time) string { return fmt.Sprint(t.UnixMicro()) }
