package redlock

import (
	"context"
	"fmt"
	"math/rand/v2"
	"strconv"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
)

// TestTokensGrowWhileServersEmpty: between every two terms one server of
// three (or two of five) is killed and comes back empty, so the servers'
// token keys keep being lost. Tokens still strictly increase, and every
// term, when it starts, has its token committed on a majority: the
// servers every later majority meets (see "Fencing tokens" in the package
// documentation). Terms end alternately by resignation (a handover that
// commits the token + 1) and by a lapsed lease.
func TestTokensGrowWhileServersEmpty(t *testing.T) {
	for _, n := range []int{3, 5} {
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			h := newHarness(t, n)
			el := faultElection(t)
			ctx := context.Background()
			var last uint64
			var lastEnd time.Time
			for i := range 8 {
				who := fmt.Sprintf("term %d", i)
				c, links := h.proxied(t, el, fmt.Sprintf("c%d", i))
				r := electortest.MustLead(t, electortest.Campaign(ctx, c), 6*faultTTL, who)
				if r.Term.Token <= last {
					t.Fatalf("%s: token %d after %d", who, r.Term.Token, last)
				}
				if !lastEnd.IsZero() && !lastEnd.Before(r.At) {
					t.Fatalf("%s began %s before the last term's deadline", who, lastEnd.Sub(r.At))
				}
				if got := h.committedOn(t, el, r.Term.Token); got < majority(n) {
					t.Fatalf("%s started with its token %d committed on %d of %d servers, want a majority", who, r.Term.Token, got, n)
				}
				last = r.Term.Token
				// Empty a minority, at random.
				for _, k := range rand.Perm(n)[:n-majority(n)] {
					h.srvs[k].Restart(t)
				}
				if i%2 == 0 {
					// The term may have ended already: emptying servers
					// that held it may leave it without a majority.
					if err := r.Term.Resign(ctx); err != nil {
						t.Fatalf("%s: resign: %v", who, err)
					}
				} else {
					// Cut off: the term ends by its deadline, its leases lapse.
					for _, p := range links {
						p.Cut()
					}
					<-r.Term.Done()
				}
				lastEnd = r.Term.ValidUntil()
			}
		})
	}
}

// committedOn counts the servers that name the term committed with token
// and whose token key is at least token.
func (h *harness) committedOn(t *testing.T, election string, token uint64) int {
	t.Helper()
	k := keysFor(election)
	n := 0
	for _, c := range h.clis {
		tok, err := c.HGet(context.Background(), k.term, "token").Result()
		if err != nil || tok != fmt.Sprint(token) {
			continue
		}
		stored, err := c.Get(context.Background(), k.token).Result()
		if err != nil {
			continue
		}
		if v, err := strconv.ParseUint(stored, 10, 64); err == nil && v >= token {
			n++
		}
	}
	return n
}
