package redis

import (
	"errors"
	"testing"

	"github.com/electd/electd/elector"
)

func TestCheckMaster(t *testing.T) {
	const run = "0123abcd"
	for _, tc := range []struct {
		name string
		m    map[string]string
		run  string
		ok   bool
	}{
		{"the write's master", map[string]string{"flags": "master", "runid": run}, run, true},
		{"the write's master, subjectively down", map[string]string{"flags": "master,s_down", "runid": run}, run, true},
		{"a failover in progress", map[string]string{"flags": "master,failover_in_progress", "runid": run}, run, false},
		{"down, failing over", map[string]string{"flags": "master,s_down,o_down,failover_in_progress", "runid": run}, run, false},
		{"another master", map[string]string{"flags": "master", "runid": "ffff"}, run, false},
		{"run not known yet", map[string]string{"flags": "master", "runid": ""}, run, false},
		{"the write's run unknown", map[string]string{"flags": "master", "runid": ""}, "", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMaster(tc.m, tc.run)
			if (err == nil) != tc.ok {
				t.Fatalf("checkMaster(%v, %q) = %v, want ok %v", tc.m, tc.run, err, tc.ok)
			}
		})
	}
}

// TestUnconfirmedIsTransient: whatever a sentinel answered, even an error
// reply, an unconfirmed step is retried, never the end of a campaign.
func TestUnconfirmedIsTransient(t *testing.T) {
	err := classify(errors.Join(errUnconfirmed, errors.New("ERR No such master with that name")))
	if got := elector.ErrorClass(err); got != classUnconfirmed {
		t.Fatalf("class %q, want %q", got, classUnconfirmed)
	}
	if isPermanent(err) {
		t.Fatalf("%v is permanent", err)
	}
}

func TestRunID(t *testing.T) {
	for _, tc := range []struct{ name, born, want string }{
		{"run and replid", "abc def", "abc"},
		{"run alone", "abc", "abc"},
		{"empty", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := runID(tc.born); got != tc.want {
				t.Fatalf("runID(%q) = %q, want %q", tc.born, got, tc.want)
			}
		})
	}
}
