package kube_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// lockerOn is candidate id of election, with a 2 s lease, made by c;
// closed when the test ends.
func lockerOn(t *testing.T, c *kube.Conn, election, id string) elector.Locker {
	t.Helper()
	el, err := c.NewElector(elector.Candidate{Election: election, ID: id, Timing: elector.Timing{TTL: 2 * time.Second}, Logger: electortest.Logger()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = el.Close() })
	return el
}

// conn is a kube.Conn for token in ns.
func conn(t *testing.T, k *testenv.Kube, token, ns string) *kube.Conn {
	t.Helper()
	leases, reviews, err := kube.Clients(k.Config(token))
	if err != nil {
		t.Fatal(err)
	}
	return &kube.Conn{Leases: leases, Reviews: reviews, Namespace: ns}
}

// TestLeastPrivilege: a service account bound to nothing but the Role of
// kube.Verbs passes the start check, and its candidates lead, hand over
// and resign; one whose Role lacks verbs is refused at start, by name.
func TestLeastPrivilege(t *testing.T) {
	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	c := conn(t, k, k.LeaseServiceAccount(t, "electd", "candidate"), "electd")
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("start check with the least-privilege Role: %v", err)
	}
	a, b := lockerOn(t, c, "least", "a"), lockerOn(t, c, "least", "b")
	ra := electortest.MustLead(t, electortest.Campaign(ctx, a), 10*time.Second, "a")
	cb := electortest.Campaign(ctx, b)
	electortest.Eventually(t, 10*time.Second, "b in line", func() bool { return b.Wakeups() == 0 && queued(t, k, "electd", "least") == 2 })
	electortest.Resign(t, ra.Term)
	rb := electortest.MustLead(t, cb, 10*time.Second, "b")
	if rb.Term.Token <= ra.Term.Token {
		t.Fatalf("token %d after %d", rb.Term.Token, ra.Term.Token)
	}
	electortest.Resign(t, rb.Term)

	short := conn(t, k, k.LeaseServiceAccount(t, "electd", "short", "get", "list", "create", "update"), "electd")
	err := short.Ping(ctx)
	if err == nil || !strings.Contains(err.Error(), "watch, delete") || !strings.Contains(err.Error(), "kind: Role") {
		t.Fatalf("start check without watch and delete: %v; want a refusal naming them and the Role", err)
	}
	if kube.Refused(err) != backend.RefusedPermission {
		t.Fatalf("the refusal %v is not classed as one", err)
	}
	var se interface{ Unwrap() error }
	if !errors.As(err, &se) {
		t.Fatalf("%T does not wrap its cause", err)
	}
}

// queued counts the Leases of an election in ns: the holder's and the tickets.
func queued(t *testing.T, k *testenv.Kube, ns, election string) int {
	t.Helper()
	return (&harness{k: k, ns: ns}).Queued(t, election)
}

// TestStartRefusals: electd's start (store.Open, as `electd run` opens the
// store) refuses, with an exit-2 configuration error, a token the API
// server does not know and a Role that lacks verbs, naming what to fix;
// and opens the store with the least-privilege Role.
func TestStartRefusals(t *testing.T) {
	k := testenv.StartKube(t)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	tests := []struct {
		name  string
		token string
		want  []string // in the error; none: it opens
	}{
		{name: "least privilege", token: k.LeaseServiceAccount(t, "electd", "electd")},
		{name: "unknown token", token: "not-a-token", want: []string{"refused the login", "$KUBECONFIG", "token"}},
		{name: "role without watch and delete", token: k.LeaseServiceAccount(t, "electd", "short", "get", "list", "create", "update"),
			want: []string{"watch, delete", "kind: Role", "examples/kubernetes/rbac.yaml"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("KUBECONFIG", k.KubeconfigNamespace(t, tc.token, ""))
			s, err := store.Open(ctx, store.Options{URL: "k8s://electd"}, nil)
			if len(tc.want) == 0 {
				if err != nil {
					t.Fatalf("open: %v", err)
				}
				_ = s.Close()
				return
			}
			var ce *elector.ConfigError
			if !errors.As(err, &ce) {
				t.Fatalf("open: %v (%T), want a configuration error (exit 2)", err, err)
			}
			for _, w := range tc.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("the error does not say %q: %v", w, err)
				}
			}
		})
	}
}
