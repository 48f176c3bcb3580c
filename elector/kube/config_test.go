package kube

import (
	"errors"
	"strings"
	"testing"
	"time"

	"k8s.io/client-go/kubernetes/fake"

	"github.com/electd/electd/elector"
)

func TestConfigValidate(t *testing.T) {
	leases := typedLeases{fake.NewClientset().CoordinationV1()}
	ok := Config{Candidate: elector.Candidate{Election: "jobs", ID: "a", Timing: elector.Timing{TTL: 2 * time.Second}}, Leases: leases, Namespace: "default"}
	tests := []struct {
		name   string
		edit   func(*Config)
		field  string
		reason string
	}{
		{name: "valid", edit: func(*Config) {}},
		{name: "ttl not whole seconds", edit: func(c *Config) { c.Timing.TTL = 2500 * time.Millisecond }, field: "ttl", reason: "use 3s"},
		{name: "ttl under a second", edit: func(c *Config) { c.Timing.TTL = 400 * time.Millisecond }, field: "ttl", reason: "use 1s"},
		{name: "semaphore", edit: func(c *Config) { c.Slots = 2 }, field: "slots"},
		{name: "bad namespace", edit: func(c *Config) { c.Namespace = "Kube_System" }, field: "store"},
		{name: "no client", edit: func(c *Config) { c.Leases = nil }, field: "store"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := ok
			tc.edit(&c)
			_, err := c.validate()
			if tc.field == "" {
				if err != nil {
					t.Fatalf("refused: %v", err)
				}
				return
			}
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(ce.Reason, tc.reason) {
				t.Fatalf("got %v, want a ConfigError on %s containing %q", err, tc.field, tc.reason)
			}
		})
	}
}

func TestLeaseName(t *testing.T) {
	tests := []struct {
		name, election, want string
	}{
		{name: "a DNS label is its own name", election: "jobs-1", want: "jobs-1"},
		{name: "upper case and underscore", election: "Jobs_1", want: "jobs-1-"},
		{name: "unicode", election: "ü", want: "my-election-"},
		{name: "long", election: strings.Repeat("a", 100), want: strings.Repeat("a", 54) + "-"},
	}
	seen := map[string]string{}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := LeaseName(tc.election)
			if got != tc.want && !(strings.HasPrefix(got, tc.want) && len(got) == len(tc.want)+8) {
				t.Fatalf("LeaseName(%q) = %q, want %q (+8 hex digits where it ends in '-')", tc.election, got, tc.want)
			}
			if len(got) > 63 {
				t.Fatalf("LeaseName(%q) = %q: %d characters, more than a DNS label's 63", tc.election, got, len(got))
			}
			seen[got] = tc.election
		})
	}
	if a, b := LeaseName("Jobs_1"), LeaseName("jobs_1"); a == b {
		t.Fatalf("two names share the Lease %q", a)
	}
}
