package redlock

import (
	"errors"
	"strings"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend/hosts"
	"github.com/electd/electd/elector/electortest"
)

func servers(addrs ...string) []Server {
	var s []Server
	for _, a := range addrs {
		s = append(s, Server{Addr: a, Client: redis.NewClient(&redis.Options{Addr: a})})
	}
	return s
}

// TestConfigRefused: every configuration that cannot keep the rule is
// refused before any server is asked, naming the field and the fix.
func TestConfigRefused(t *testing.T) {
	cand := elector.Candidate{Election: "e", ID: "a"}
	tests := []struct {
		name, field, want string
		cfg               Config
	}{
		{"two servers", "store", "at least 3", Config{Servers: servers("h1:1", "h2:1"), Candidate: cand}},
		{"one server", "store", "use redis://", Config{Servers: servers("h1:1"), Candidate: cand}},
		{"a server twice", "store", "named twice", Config{Servers: servers("h1:1", "h2:1", "h1:1"), Candidate: cand}},
		{"no client", "store", "has no client", Config{Servers: []Server{{Addr: "h1:1"}, {Addr: "h2:1"}, {Addr: "h3:1"}}, Candidate: cand}},
		{"slots", "slots", "not sound", Config{Servers: servers("h1:1", "h2:1", "h3:1"), Candidate: elector.Candidate{Election: "e", ID: "a", Slots: 2}}},
		{"bad election", "election", "", Config{Servers: servers("h1:1", "h2:1", "h3:1"), Candidate: elector.Candidate{ID: "a"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(tt.cfg)
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != tt.field || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("New: %v; want a ConfigError on %q saying %q", err, tt.field, tt.want)
			}
		})
	}
}

// TestSlotsRefused: the backend refuses a semaphore through its Conn too,
// as electd lock --slots reaches it.
func TestSlotsRefused(t *testing.T) {
	conn := electortest.Open(t, Backend, "redlock://127.0.0.1:1,127.0.0.1:2,127.0.0.1:3")
	_, err := conn.NewElector(elector.Candidate{Election: "e", ID: "a", Slots: 3})
	var ce *elector.ConfigError
	if !errors.As(err, &ce) || ce.Field != "slots" {
		t.Fatalf("NewElector with 3 slots: %v; want a ConfigError on slots", err)
	}
	t.Log(err)
}

func TestCheckURL(t *testing.T) {
	tests := []struct {
		name  string
		hosts []string
		path  string
		want  string // "" for accepted
	}{
		{"three", []string{"a:1", "b:1", "c:1"}, "", ""},
		{"five with db", []string{"a:1", "b:1", "c:1", "d:1", "e:1"}, "3", ""},
		{"two", []string{"a:1", "b:1"}, "", "at least 3"},
		{"twice", []string{"a:1", "b:1", "a:1"}, "", "twice"},
		{"bad db", []string{"a:1", "b:1", "c:1"}, "x", "not a number"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := check(hosts.Endpoint{Scheme: "redlock", Hosts: tt.hosts, Path: tt.path})
			if tt.want == "" && err != nil || tt.want != "" && (err == nil || !strings.Contains(err.Error(), tt.want)) {
				t.Fatalf("check: %v, want %q", err, tt.want)
			}
		})
	}
}
