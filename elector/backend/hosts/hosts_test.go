package hosts

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
)

// TestParse: the syntax every host-based backend shares, through a Spec
// that takes any path: user info, host lists with IPv6, ports, the path,
// and the refusals, each naming --store without the password.
func TestParse(t *testing.T) {
	tests := []struct {
		raw        string
		hosts      []string
		user, pw   string
		path       string
		reason     string // part of the refusal; "" = accepted
		notInError string // never in the refusal
	}{
		{raw: "x://h1:1", hosts: []string{"h1:1"}},
		{raw: "x://h1:1,h2:2,[::1]:3/a/b/", hosts: []string{"h1:1", "h2:2", "[::1]:3"}, path: "a/b"},
		{raw: "x://u:p%2Fw@h:1/0", hosts: []string{"h:1"}, user: "u", pw: "p/w", path: "0"},
		{raw: "x://:pw@h:1", hosts: []string{"h:1"}, pw: "pw"},
		{raw: "x://u:@h:1", hosts: []string{"h:1"}, user: "u"},
		{raw: "x://[fe80::1%25eth0]:2", hosts: []string{"[fe80::1%25eth0]:2"}}, // as given
		{raw: "x://h1", reason: `host "h1" needs a port (e.g. h1:4242)`},
		{raw: "x://h1:0", reason: "1..65535"},
		{raw: "x://h1:1,,h2:2", reason: "empty host"},
		{raw: "x://:1", reason: "host missing"},
		{raw: "x://", reason: "is not a URL like x://host:4242"},
		{raw: "x://h:1?password=secret", reason: "no query string", notInError: "secret"},
		{raw: "x://h:1#secret", reason: "no query string", notInError: "secret"},
		{raw: "x://u:se/cret@h:1", reason: "stray '@'", notInError: "cret"},
		{raw: "x://h:1/refused", reason: "the check refuses"},
	}
	sp := Spec{DefaultPort: "4242", Check: func(ep Endpoint) error {
		if ep.Path == "refused" {
			return elector.Configf("store", "the check refuses %q", ep.Path)
		}
		return nil
	}}
	for _, tc := range tests {
		t.Run(tc.raw, func(t *testing.T) {
			rest := strings.TrimPrefix(tc.raw, "x://")
			var got Endpoint
			sp.Dial = func(_ context.Context, ep Endpoint) (backend.Conn, error) { got = ep; return nil, nil }
			target, err := sp.Parse(backend.URL{Scheme: backend.Scheme{Name: "x"}, Rest: rest, Redacted: "x://REDACTED"})
			if tc.reason != "" {
				var ce *elector.ConfigError
				if !errors.As(err, &ce) || ce.Field != "store" || !strings.Contains(ce.Reason, tc.reason) {
					t.Fatalf("Parse = %v, want a store error containing %q", err, tc.reason)
				}
				if tc.notInError != "" && strings.Contains(err.Error(), tc.notInError) {
					t.Fatalf("the refusal shows the password: %v", err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if !slices.Equal(target.Hosts, tc.hosts) || target.User != tc.user || target.Password != tc.pw {
				t.Fatalf("Parse = %+v, want hosts %q, user %q, password %q", target, tc.hosts, tc.user, tc.pw)
			}
			// Dial hands the backend the endpoint with store/'s settings.
			if _, err := target.Dial(context.Background(), backend.Settings{Password: "final", Secrets: map[string]string{"s": "v"}}); err != nil {
				t.Fatal(err)
			}
			if got.Scheme != "x" || !slices.Equal(got.Hosts, tc.hosts) || got.Path != tc.path || got.User != tc.user ||
				got.Password != "final" || got.Secrets["s"] != "v" {
				t.Fatalf("Dial got %+v", got)
			}
		})
	}
}

func TestSplitList(t *testing.T) {
	tests := []struct{ raw, list, placeheld string }{
		{"etcd://h1:1,h2:2", "h1:1,h2:2", "etcd://" + Placeholder},
		{"redis://u:p@h:1/0?x#y", "h:1", "redis://u:p@" + Placeholder + "/0?x#y"},
		{"k8s://", "", "k8s://"},
		{"k8s://ns", "ns", "k8s://" + Placeholder},
		{"h:1", "", "h:1"},
	}
	for _, tc := range tests {
		if list, placeheld := SplitList(tc.raw); list != tc.list || placeheld != tc.placeheld {
			t.Errorf("SplitList(%q) = %q, %q; want %q, %q", tc.raw, list, placeheld, tc.list, tc.placeheld)
		}
	}
}
