package store

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// TestMembers: an etcd URL reports one member per host, in the URL's
// order, the one member of a single server included, over TLS with a
// password too (a member's Status needs a logged-in user); a Redis URL
// reports none, and /healthz keeps asking it PING.
func TestMembers(t *testing.T) {
	etcd := testenv.StartEtcd(t)
	ca := testenv.NewCA(t, "ca")
	secure := testenv.StartEtcdTLS(t, ca)
	const secret = "electd-pw-members"
	secure.EnableAuth(t, "root-pw-members")
	secure.AddUser(t, "electd", secret, "/electd/")
	cert := ca.Client(t, "electd")
	redis := testenv.StartRedis(t)
	tests := []struct {
		name      string
		opts      Options
		endpoints []string // nil: no members reported
		leader    []bool   // per endpoint: answers as its own leader
	}{
		{name: "etcd", opts: Options{URL: etcd.URL()}, endpoints: []string{etcd.Endpoint()}, leader: []bool{true}},
		{name: "etcd with a host down", opts: Options{URL: "etcd://127.0.0.1:1," + etcd.Endpoint()},
			endpoints: []string{"127.0.0.1:1", etcd.Endpoint()}, leader: []bool{false, true}},
		{name: "etcds with a user", opts: Options{URL: strings.Replace(secure.URL(), "://", "://electd@", 1), Password: secret,
			CAFile: ca.CertFile, CertFile: cert.CertFile, KeyFile: cert.KeyFile},
			endpoints: []string{secure.Endpoint()}, leader: []bool{true}},
		{name: "redis", opts: Options{URL: "redis://" + redis.Addr()}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			st, err := Open(ctx, tc.opts, nil)
			if err != nil {
				t.Fatalf("open %s: %v", tc.opts.URL, err)
			}
			defer st.Close()
			ms, err := st.Members(ctx)
			if err != nil {
				t.Fatalf("members: %v", err)
			}
			if tc.endpoints == nil {
				if ms != nil {
					t.Fatalf("members = %+v, want none", ms)
				}
				return
			}
			if len(ms) != len(tc.endpoints) {
				t.Fatalf("members = %+v, want %v", ms, tc.endpoints)
			}
			for i, m := range ms {
				if m.Endpoint != tc.endpoints[i] {
					t.Errorf("member %d is %s, want %s", i, m.Endpoint, tc.endpoints[i])
				}
				up := tc.leader[i]
				if m.Answers != up || (m.Error == "") != up || (m.Leader != "" && m.Leader == m.ID) != up {
					t.Errorf("member %s: %+v; want it answering as its own leader: %v", m.Endpoint, m, up)
				}
			}
		})
	}
}
