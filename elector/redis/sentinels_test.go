package redis

import (
	"errors"
	"testing"

	"github.com/electd/electd/elector"
)

func TestCheckMaster(t *testing.T) {
	const run, addr = "0123abcd", "10.0.0.1:6379"
	srv := server{run: run, addr: addr}
	master := func(flags, runid string) map[string]string {
		return map[string]string{"name": "m", "ip": "10.0.0.1", "port": "6379", "flags": flags, "runid": runid}
	}
	for _, tc := range []struct {
		name string
		m    map[string]string
		srv  server
		ok   bool
	}{
		{"the write's master", master("master", run), srv, true},
		{"the write's master, subjectively down", master("master,s_down", run), srv, true},
		{"a failover in progress", master("master,failover_in_progress", run), srv, false},
		{"down, failing over", master("master,s_down,o_down,failover_in_progress", run), srv, false},
		{"another master", master("master", "ffff"), srv, false},
		{"another master at the same address", master("master", "ffff"), server{run: run, addr: addr}, false},
		{"run not read yet, same address", master("master", ""), srv, true},
		{"run not read yet, same address, failing over", master("master,failover_in_progress", ""), srv, false},
		{"run not read yet, another address", master("master", ""), server{run: run, addr: "10.0.0.2:6379"}, false},
		{"run not read yet, address unknown", master("master", ""), server{run: run}, false},
		{"the write's run unknown", master("master", ""), server{}, false},
		{"IPv6 address", map[string]string{"ip": "::1", "port": "6379", "flags": "master"}, server{addr: "[::1]:6379"}, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			err := checkMaster(tc.m, tc.srv)
			if (err == nil) != tc.ok {
				t.Fatalf("checkMaster(%v, %+v) = %v, want ok %v", tc.m, tc.srv, err, tc.ok)
			}
		})
	}
}

func TestLocalAddr(t *testing.T) {
	for _, tc := range []struct{ name, info, want string }{
		{"redis 7", "id=5 addr=127.0.0.1:51234 laddr=127.0.0.1:6379 fd=8 name= age=0", "127.0.0.1:6379"},
		{"IPv6", "id=5 addr=[::1]:51234 laddr=[::1]:6379 fd=8", "[::1]:6379"},
		{"no laddr (refused, or before 6.2)", "", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if got := localAddr(tc.info); got != tc.want {
				t.Fatalf("localAddr(%q) = %q, want %q", tc.info, got, tc.want)
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
