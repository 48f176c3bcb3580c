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
	leases := fake.NewClientset().CoordinationV1()
	ok := Config{Candidate: elector.Candidate{Election: "jobs", ID: "a", Timing: elector.Timing{TTL: 2 * time.Second}}, Leases: leases, Namespace: "default"}
	tests := []struct {
		name   string
		edit   func(*Config)
		field  string
		reason string
	}{
		{name: "valid", edit: func(*Config) {}},
		{name: "election not a DNS label", edit: func(c *Config) { c.Election = "Jobs_1" }, field: "election", reason: `(e.g. "jobs-1")`},
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
