package e2e

import (
	"encoding/json"
	"net/http"
	"testing"
	"time"

	"github.com/electd/electd/test/kit"
	"github.com/electd/electd/test/proc"
	"github.com/electd/electd/test/record"
)

// refusal is how long the store refuses writes: short enough that a renewal
// after it (retried every 100 ms at most) comes before the child must be
// stopped, ttl·(1−drift) − ε − stop-timeout − 200 ms after the last renewal
// before it, which came at most renewInterval before the refusal.
const refusal = ttl / 4

// testStoreRefusesWrites: the store refuses every write for less than the
// lease (Redis: out of memory, on every master; on every server of a
// Redlock quorum). The leader's renewals fail, and its
// term survives: the same child runs throughout and no other starts.
// Meanwhile /healthz is 503 and names the failing request and its class,
// though the store still answers PING; it is 200 again once the store
// takes writes.
func testStoreRefusesWrites(t *testing.T, s *kit.Store) {
	refuser, ok := s.Servers.(kit.WriteRefuser)
	if !ok {
		t.Skip("the store has no write refusal a test can switch on and off (etcd)")
	}
	h := newHarness(t, s)
	lead, follower, run := h.leaderAndFollower(h.direct())

	class, lift := refuser.RefuseWrites(t)
	// Whatever fails below, the servers take writes again for the next
	// scenario (they are shared).
	t.Cleanup(lift)
	refused := time.Now()
	var seen storeErrorsDoc
	h.Poll(refusal, "/healthz to name the refused renewals", func() (bool, string) {
		seen = healthz(t, lead)
		for _, e := range seen.StoreErrors {
			if e.Op == "renew" && e.Class == class {
				return seen.code == http.StatusServiceUnavailable, ""
			}
		}
		return false, seen.String()
	})
	<-time.After(time.Until(refused.Add(refusal))) // the fault's length, not a synchronisation
	lift()

	h.Poll(2*ttl, "/healthz to be 200 again", func() (bool, string) {
		d := healthz(t, lead)
		return d.code == http.StatusOK && len(d.StoreErrors) == 0, d.String()
	})
	if now := h.RunOf(run.Pid); !now.Stop.IsZero() || !proc.Alive(run.Pid) {
		t.Fatalf("the leader's child stopped during the refusal: %s", now)
	}
	if runs := h.Check(record.Options{}); len(runs) != 1 {
		t.Fatalf("%d children ran, want the first one only: %v", len(runs), runs)
	}
	if l, _, err := follower.Leader(); err != nil || l.Leader == nil || l.Leader.ID != lead.ID {
		t.Fatalf("after the refusal the follower sees %+v (%v), want %s", l, err, lead.ID)
	}
	t.Logf("/healthz during the refusal: %s", seen)
}

// storeErrorsDoc is a /healthz answer.
type storeErrorsDoc struct {
	code        int
	Status      string `json:"status"`
	Error       string `json:"error"`
	StoreErrors []struct {
		Op       string `json:"op"`
		Class    string `json:"class"`
		Failures int    `json:"failures"`
	} `json:"store_errors"`
}

func (d storeErrorsDoc) String() string {
	b, _ := json.Marshal(d) // a plain struct: cannot fail
	return http.StatusText(d.code) + " " + string(b)
}

func healthz(t *testing.T, n *node) storeErrorsDoc {
	t.Helper()
	code, body, err := n.Get("/healthz")
	if err != nil {
		t.Fatalf("GET /healthz of %s: %v", n.ID, err)
	}
	d := storeErrorsDoc{code: code}
	if err := json.Unmarshal(body, &d); err != nil {
		t.Fatalf("GET /healthz of %s: %v in %s", n.ID, err, body)
	}
	return d
}
