package kube

import (
	"crypto/sha256"
	"encoding/hex"
	"strings"
	"time"

	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/electd/electd/elector"
)

// Config is one candidate on one namespace's Leases.
type Config struct {
	elector.Candidate
	// Leases is the client of the coordination.k8s.io/v1 Leases; its rate
	// limiter must not throttle (Clients builds one that does not).
	Leases LeasesGetter
	// Namespace holds the election's Leases.
	Namespace string
}

// validate checks cfg (elector.Candidate.Validate and the rules of a
// Lease) and fills in its defaults.
func (cfg Config) validate() (Config, error) {
	c, err := cfg.Candidate.Validate()
	if err != nil {
		return cfg, err
	}
	cfg.Candidate = c
	switch {
	case cfg.Leases == nil:
		return cfg, elector.Configf("store", "no Kubernetes client")
	case cfg.Slots > 1:
		return cfg, elector.Configf("slots", "%d slots: k8s:// does not offer semaphores (one Lease holds one term); use --slots 1 on k8s://, or an etcd:// or redis:// store for --slots", cfg.Slots)
	}
	if errs := validation.IsDNS1123Label(cfg.Namespace); len(errs) > 0 {
		return cfg, elector.Configf("store", "namespace %q is not a Kubernetes namespace name: %s", cfg.Namespace, errs[0])
	}
	if t := cfg.Timing.TTL; t%time.Second != 0 {
		return cfg, elector.Configf("ttl", "a Lease counts its duration in whole seconds, so on k8s:// --ttl must be one, got %s; use %s",
			t, t.Round(time.Second)+time.Second*time.Duration(boolInt(t.Round(time.Second) == 0)))
	}
	return cfg, nil
}

// LeaseName is the name of an election's Lease: the election's own name
// when it is a DNS label (what client-go electors and kubectl name it
// by), else its letters and digits in lower case, with '-' for the rest,
// and 8 hex digits of its SHA-256, so that every election name electd
// takes on any store names one Lease, and two names never the same one.
func LeaseName(election string) string {
	if len(validation.IsDNS1123Label(election)) == 0 {
		return election
	}
	sum := sha256.Sum256([]byte(election))
	base := suggestName(election)
	if len(base) > validation.DNS1123LabelMaxLength-9 {
		base = strings.TrimRight(base[:validation.DNS1123LabelMaxLength-9], "-")
	}
	return base + "-" + hex.EncodeToString(sum[:4])
}

func boolInt(b bool) int {
	if b {
		return 1
	}
	return 0
}

// suggestName lowers name and replaces what a DNS label does not take by
// '-', for the error's example.
func suggestName(name string) string {
	out := make([]byte, 0, len(name))
	for _, r := range name {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9':
			out = append(out, byte(r))
		case r >= 'A' && r <= 'Z':
			out = append(out, byte(r-'A'+'a'))
		default:
			out = append(out, '-')
		}
	}
	s := string(out)
	for len(s) > 0 && s[0] == '-' {
		s = s[1:]
	}
	for len(s) > 0 && s[len(s)-1] == '-' {
		s = s[:len(s)-1]
	}
	if len(s) > validation.DNS1123LabelMaxLength {
		s = s[:validation.DNS1123LabelMaxLength]
	}
	if s == "" {
		s = "my-election"
	}
	return s
}
