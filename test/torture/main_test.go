package torture

import (
	"flag"
	"fmt"
	"math/rand/v2"
	"os"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/test/kit"
)

// Flags of the test binary. Each defaults to an environment variable, so
// that `make torture` (and CI) can set them without -args.
var (
	flagSeed     = flag.Uint64("torture.seed", envUint("TORTURE_SEED", 0), "seed of the fault schedule (0: pick one and print it); $TORTURE_SEED")
	flagFaults   = flag.Int("torture.faults", int(envUint("TORTURE_FAULTS", 16)), "faults per backend; $TORTURE_FAULTS")
	flagTopoF    = flag.Int("torture.topology-faults", envInt("TORTURE_TOPOLOGY_FAULTS", -1), "faults per topology (redis+sentinel, redis+cluster, etcd-cluster, redlock, zk-ensemble; -1: -torture.faults); $TORTURE_TOPOLOGY_FAULTS")
	flagNodes    = flag.Int("torture.nodes", int(envUint("TORTURE_NODES", 5)), "electd processes per backend; $TORTURE_NODES")
	flagTTL      = flag.Duration("torture.ttl", envDuration("TORTURE_TTL", 2*time.Second), "--ttl of every electd; $TORTURE_TTL")
	flagBackends = flag.String("torture.backends", envString("TORTURE_BACKENDS", "etcd,redis,redis+sentinel,redis+cluster,etcd-cluster,redlock,zk,zk-ensemble"), "comma-separated backends to attack; $TORTURE_BACKENDS")
	flagBound    = flag.Duration("torture.recovery", envDuration("TORTURE_RECOVERY", 8*time.Second), "a leader must run again within ttl plus this after a fault heals; $TORTURE_RECOVERY")
	flagReport   = flag.String("torture.report", envString("TORTURE_REPORT", ""), "append the figures, as a Markdown table, to this file; $TORTURE_REPORT")
	flagKeep     = flag.String("torture.keep", envString("TORTURE_KEEP", ""), "copy the electd and record logs into this directory at the end; $TORTURE_KEEP")
	flagContain  = flag.String("torture.containment", envString("TORTURE_CONTAINMENT", ""), "--containment of every electd (empty: electd's default); $TORTURE_CONTAINMENT")
	flagNobody   = flag.Bool("torture.nobody", envString("TORTURE_NOBODY", "") != "", "run every electd as nobody (uid 65534; the harness stays root): containment without root, userns by default; $TORTURE_NOBODY")
	flagKinds    = flag.String("torture.kinds", envString("TORTURE_KINDS", ""), "comma-separated fault kinds to draw, where they apply (empty: all; restart-node is still forced when too few candidates are up); $TORTURE_KINDS")
)

// config is one run's settings, fixed before the first fault.
type config struct {
	seed          uint64
	faults, nodes int
	topoFaults    int // faults on a topology
	ttl           time.Duration
	renew         time.Duration // electd's default, ttl/5
	window        time.Duration // a renewal guarantees the lease locally for this long after it was sent
	stopTimeout   time.Duration
	coolDown      time.Duration
	recoveryBound time.Duration
	kinds         []kind // -torture.kinds (nil: every kind)
}

func newConfig(t *testing.T) config {
	c := config{
		seed:          *flagSeed,
		faults:        *flagFaults,
		topoFaults:    *flagTopoF,
		nodes:         *flagNodes,
		ttl:           *flagTTL,
		recoveryBound: *flagBound,
		coolDown:      200 * time.Millisecond,
	}
	if c.seed == 0 {
		c.seed = rand.Uint64() >> 1 // fits an int64 for `go test -torture.seed`
	}
	if c.topoFaults < 0 {
		c.topoFaults = c.faults
	}
	if c.nodes < 2 || c.faults < 0 || c.ttl < time.Second {
		t.Fatalf("torture: need at least 2 nodes, 0 faults and a ttl of 1s (got %d, %d, %s)", c.nodes, c.faults, c.ttl)
	}
	for _, name := range strings.Split(*flagKinds, ",") {
		if name = strings.TrimSpace(name); name == "" {
			continue
		}
		if !slices.Contains(allKinds, kind(name)) {
			t.Fatalf("torture: -torture.kinds: no fault kind %q", name)
		}
		c.kinds = append(c.kinds, kind(name))
	}
	c.renew = c.ttl / 5
	c.window = elector.Timing{TTL: c.ttl}.WithDefaults().Window()
	c.stopTimeout = c.ttl / 4
	return c
}

// rng is the fault schedule's source for one backend: the same seed gives
// the same sequence of choices on each backend.
func (c config) rng(backend string) *rand.Rand {
	var h uint64 = 14695981039346656037
	for _, b := range []byte(backend) {
		h = (h ^ uint64(b)) * 1099511628211
	}
	return rand.New(rand.NewPCG(c.seed, h))
}

// bin holds electd and the recorder, built by TestMain.
var bin kit.Binaries

func TestMain(m *testing.M) { kit.Main(m, "torture", "TORTURE", &bin) }

// selected are the backends named by -torture.backends.
func selected(t *testing.T) []kit.Backend {
	bs, err := kit.Select(*flagBackends)
	if err != nil {
		t.Fatalf("torture: %v", err)
	}
	return bs
}

func envString(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

func envUint(name string, def uint64) uint64 {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			fmt.Fprintf(os.Stderr, "torture: $%s=%q is not a number\n", name, v)
			os.Exit(2)
		}
		return n
	}
	return def
}

// kindsOn are the kinds drawn on s: kindsFor's, or those of them that
// -torture.kinds names (none: a failure).
func (c config) kindsOn(t *testing.T, s *kit.Store) []kind {
	all := kindsFor(s)
	if c.kinds == nil {
		return all
	}
	var out []kind
	for _, k := range all {
		if slices.Contains(c.kinds, k) {
			out = append(out, k)
		}
	}
	if len(out) == 0 {
		t.Fatalf("torture %s: none of -torture.kinds %v is drawn on it", s.Name, c.kinds)
	}
	return out
}

// faultsOn is the number of faults to inject on s.
func (c config) faultsOn(s *kit.Store) int {
	if s.Proxyable() {
		return c.faults
	}
	return c.topoFaults
}

func envInt(name string, def int) int {
	if v := os.Getenv(name); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "torture: $%s=%q is not a number\n", name, v)
			os.Exit(2)
		}
		return n
	}
	return def
}

func envDuration(name string, def time.Duration) time.Duration {
	if v := os.Getenv(name); v != "" {
		d, err := time.ParseDuration(v)
		if err != nil {
			fmt.Fprintf(os.Stderr, "torture: $%s=%q is not a duration\n", name, v)
			os.Exit(2)
		}
		return d
	}
	return def
}
