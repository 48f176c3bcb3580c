package redis

import (
	"log/slog"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/clock"
	"github.com/electd/electd/elector"
)

// Config configures one candidate in one election.
type Config struct {
	// Client is the connection to Redis (a *redis.Client, *redis.ClusterClient,
	// failover client or ring). The caller owns it: Close does not close it.
	// Set ContextTimeoutEnabled on it so that a store request never outlives
	// the renewal it belongs to (see the package documentation).
	Client redis.UniversalClient
	// Election names the election. Non-empty, at most 128 bytes, no braces,
	// whitespace or control characters.
	Election string
	// ID identifies this candidate; it is what others see as the leader.
	// Same rules as Election.
	ID string
	// Address is the URL this candidate advertises while it leads (optional).
	Address string
	// Timing is the lease timing; zero fields take their defaults. Every
	// candidate of an election must use the same TTL.
	Timing elector.Timing
	// Clock is nil for the real clock.
	Clock clock.Clock
	// Logger is nil to discard logs.
	Logger *slog.Logger
	// Instrument receives store errors that are retried rather than returned;
	// nil discards them.
	Instrument elector.Instrument
	// Slots lets up to Slots candidates hold at once (a semaphore); 0 or 1
	// is a plain election. Every candidate of an election must agree.
	Slots int
}

const (
	maxNameLen    = 128
	maxAddressLen = 1024
)

// validate checks cfg and returns it with defaults filled in.
func (cfg Config) validate() (Config, error) {
	if cfg.Client == nil {
		return cfg, elector.Configf("store", "no Redis client given")
	}
	if err := checkName("election", cfg.Election); err != nil {
		return cfg, err
	}
	if err := checkName("id", cfg.ID); err != nil {
		return cfg, err
	}
	if len(cfg.Address) > maxAddressLen {
		return cfg, elector.Configf("advertise", "longer than %d bytes", maxAddressLen)
	}
	if !utf8.ValidString(cfg.Address) {
		return cfg, elector.Configf("advertise", "not valid UTF-8")
	}
	for _, r := range cfg.Address {
		if unicode.IsControl(r) {
			return cfg, elector.Configf("advertise", "contains the control character %U", r)
		}
	}
	if cfg.Slots == 0 {
		cfg.Slots = 1
	}
	if err := elector.ValidateSlots(cfg.Slots); err != nil {
		return cfg, err
	}
	cfg.Timing = cfg.Timing.WithDefaults()
	if err := cfg.Timing.Validate(); err != nil {
		return cfg, err
	}
	cfg.Clock = clock.OrReal(cfg.Clock)
	if cfg.Logger == nil {
		cfg.Logger = slog.New(slog.DiscardHandler)
	}
	cfg.Instrument = elector.OrNop(cfg.Instrument)
	return cfg, nil
}

// checkName applies the rules shared by election names and candidate ids:
// they end up inside key names and pub/sub payloads, where braces would break
// the Redis Cluster hash tag and whitespace the message format.
func checkName(field, s string) error {
	switch {
	case s == "":
		return elector.Configf(field, "must not be empty")
	case len(s) > maxNameLen:
		return elector.Configf(field, "%q is longer than %d bytes", s[:32]+"…", maxNameLen)
	case !utf8.ValidString(s):
		return elector.Configf(field, "%q is not valid UTF-8", s)
	}
	for _, r := range s {
		switch {
		case r == '{' || r == '}':
			return elector.Configf(field, "%q must not contain braces (they delimit the Redis Cluster hash tag)", s)
		case unicode.IsSpace(r):
			return elector.Configf(field, "%q must not contain whitespace", s)
		case unicode.IsControl(r):
			return elector.Configf(field, "%q must not contain control characters", s)
		}
	}
	return nil
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
	born    string // HASH at (server µs), run (run_id): when this state began
	slots   string // HASH entry → slot count, for entries of semaphores (> 1)
	holders string // HASH entry → "token since", the holders of a semaphore
	lastRun string // STRING once-per-period run record, with an expiry
	channel string // pub/sub channel (not a key)
}

func keysFor(election string) keys {
	p := "electd:{" + election + "}:"
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
		channel: p + "events",
	}
}

// all lists the keys in the order the scripts expect them.
func (k keys) all() []string {
	return []string{k.queue, k.expiry, k.cand, k.term, k.seq, k.token, k.born, k.slots, k.holders}
}

// ttlMillis is the TTL the server enforces, rounded up to its 1 ms
// resolution so that the server's lease is never shorter than the local one.
func ttlMillis(ttl time.Duration) int64 {
	return int64((ttl + time.Millisecond - 1) / time.Millisecond)
}
