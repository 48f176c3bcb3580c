package etcd

import (
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/electd/electd/elector"
)

// DefaultPrefix is where elections live in the key space.
const DefaultPrefix = "/electd/elections/"

// Config configures one candidate.
type Config struct {
	// Client is the etcd client; the caller owns it (Close does not close it).
	Client *clientv3.Client
	// Candidate is the candidate: election, id, address, timing, slots,
	// clock, logger and instrument. etcd leases have whole-second TTLs: a
	// fractional TTL is rounded up for the store (safe: the store then
	// holds the lease longer than we rely on) and kept as given for the
	// local deadline.
	elector.Candidate
	// Prefix of the key space; DefaultPrefix when empty.
	Prefix string
	// RunPrefix is where once-per-period run records live, one key per
	// election; DefaultRunPrefix when empty. It must not lie under Prefix.
	RunPrefix string
}

// DefaultRunPrefix is where once-per-period run records live.
const DefaultRunPrefix = "/electd/runs/"

// validate checks cfg and returns it with defaults filled in.
func (cfg Config) validate() (Config, error) {
	if cfg.Client == nil {
		return cfg, elector.Configf("store", "an etcd client is required")
	}
	c, err := cfg.Candidate.Validate()
	if err != nil {
		return cfg, err
	}
	cfg.Candidate = c
	cfg.Prefix = withSlash(cfg.Prefix, DefaultPrefix)
	cfg.RunPrefix = withSlash(cfg.RunPrefix, DefaultRunPrefix)
	if strings.HasPrefix(cfg.RunPrefix, cfg.Prefix) || strings.HasPrefix(cfg.Prefix, cfg.RunPrefix) {
		return cfg, elector.Configf("store", "run-record prefix %q and election prefix %q must not contain each other", cfg.RunPrefix, cfg.Prefix)
	}
	return cfg, nil
}

// withSlash is p, or def when p is empty, ending in '/'.
func withSlash(p, def string) string {
	if p == "" {
		p = def
	}
	if !strings.HasSuffix(p, "/") {
		p += "/"
	}
	return p
}
