package redis

import (
	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/internal/rediskit"
)

// Config configures one candidate in one election.
type Config struct {
	// Client is the connection to Redis (a *redis.Client, *redis.ClusterClient,
	// failover client or ring). The caller owns it: Close does not close it.
	// Set ContextTimeoutEnabled on it so that a store request never outlives
	// the renewal it belongs to (see the package documentation).
	Client redis.UniversalClient
	// Replicas is how many replicas must acknowledge (WAIT) the write of a
	// step before its reply counts: a renewal or a grant that no replica
	// has is not one. 0: every reply counts. Sentinel's electd sets 1, so
	// that a master cut off from its replicas (and failed over by the
	// sentinels) cannot keep a leader leading: see the package
	// documentation. It needs a client that runs a pipeline on one
	// connection (not a *redis.ClusterClient).
	Replicas int
	// Sentinels, if set, must confirm every step that Replicas waits
	// for: after the step and its WAIT returned, every one of them must
	// still monitor the server it ran on as the master (its run_id),
	// with no failover of it in progress, else its reply does not count
	// (class "unconfirmed"). WAIT alone does not keep a leader from
	// renewing on an old master that a replica still follows after the
	// sentinels promoted another (see the package documentation). They
	// must be every sentinel that monitors the master. Needs Replicas
	// > 0. The caller owns them: Close does not close them.
	Sentinels *Sentinels
	// Candidate is the candidate: election, id, address, timing, slots,
	// clock, logger and instrument. Names end up inside key names (in the
	// {election} hash tag) and pub/sub payloads.
	elector.Candidate
}

// validate checks cfg and returns it with defaults filled in.
func (cfg Config) validate() (Config, error) {
	if cfg.Client == nil {
		return cfg, elector.Configf("store", "no Redis client given")
	}
	if cfg.Replicas < 0 {
		return cfg, elector.Configf("replicas", "%d is negative; use 0 (no WAIT) or the replicas a write must reach", cfg.Replicas)
	}
	if _, ok := cfg.Client.(*redis.ClusterClient); ok && cfg.Replicas > 0 {
		return cfg, elector.Configf("replicas", "WAIT cannot follow a script on a Redis Cluster client; use 0")
	}
	if cfg.Sentinels != nil && cfg.Replicas == 0 {
		return cfg, elector.Configf("replicas", "the sentinels confirm only the steps WAIT waits for; set at least 1")
	}
	c, err := cfg.Candidate.Validate()
	if err != nil {
		return cfg, err
	}
	cfg.Candidate = c
	return cfg, nil
}

// keys are the Redis keys of one election. The {election} hash tag keeps
// them in one Redis Cluster slot, as the scripts require.
type keys struct {
	queue   string // ZSET entry → arrival sequence
	expiry  string // ZSET entry → lease deadline, server µs
	cand    string // HASH entry → "id\naddress"
	term    string // HASH entry, id, address, token, since
	seq     string // STRING arrival counter
	token   string // STRING last fencing token
	born    string // HASH at (server µs), run ("run_id master_replid"), why: when and why this state's epoch began; last: latest step (server µs)
	slots   string // HASH entry → slot count, for entries of semaphores (> 1)
	holders string // HASH entry → "token since", the holders of a semaphore
	lastRun string // STRING once-per-period run record, lapsing by the server's clock
	channel string // pub/sub channel (not a key)
	// server is the server record of the epoch rule (rediskit.EpochLua):
	// one per database, the election's own under Redis Cluster.
	server string
}

// keysOf are the keys of election for client c: the same names in every
// database, but the channel, which is server-wide, names the database, and
// the server record is the election's own under Redis Cluster.
func keysOf(election string, c redis.UniversalClient) keys {
	k := keysFor(election)
	k.channel = rediskit.Channel(keyPrefix(election), rediskit.DB(c))
	k.server = rediskit.ServerKey(c, keyPrefix(election))
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
		seq:     p + "seq",
		token:   p + "token",
		born:    p + "born",
		slots:   p + "slots",
		holders: p + "holders",
		lastRun: p + "lastrun",
		channel: rediskit.Channel(p, 0),
		server:  rediskit.ServerKeyIn(0),
	}
}

func keyPrefix(election string) string { return "electd:{" + election + "}:" }

// all lists the election's keys in the order the step script expects
// them.
func (k keys) all() []string {
	return []string{k.queue, k.expiry, k.cand, k.term, k.seq, k.token, k.born, k.slots, k.holders}
}

// step lists the step script's keys: the election's, then the server
// record.
func (k keys) step() []string { return append(k.all(), k.server) }
