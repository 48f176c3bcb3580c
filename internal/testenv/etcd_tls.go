package testenv

import (
	"context"
	"crypto/tls"
	"strconv"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// etcdTLS is the TLS set-up of an etcd started by StartEtcdTLS.
type etcdTLS struct {
	ca     *CA
	server KeyPair
	client *tls.Config // presents testenv's own client certificate
}

// StartEtcdTLS starts etcd as StartEtcd does, but its client port speaks
// only TLS with a certificate issued by ca for 127.0.0.1 and localhost, and
// requires a client certificate signed by ca (--client-cert-auth
// --trusted-ca-file). Issue one with ca.Client. The probe and Client use a
// client certificate of their own, with an empty common name.
func StartEtcdTLS(t testing.TB, ca *CA) *Etcd {
	t.Helper()
	own := ca.anonymousClient(t, "testenv-etcd")
	tc := &etcdTLS{ca: ca, server: ca.Server(t, "etcd-server"), client: ca.ClientTLS(t, &own)}
	return startEtcd(t, tc, false)
}

// URL returns the --store URL of this server: etcd://127.0.0.1:PORT, or
// etcds://… when it was started by StartEtcdTLS.
func (e *Etcd) URL() string {
	if e.tls != nil {
		return "etcds://" + e.Endpoint()
	}
	return "etcd://" + e.Endpoint()
}

func (e *Etcd) rootPassword() string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.rootPass
}

// EnableAuth creates the user root with rootPassword and the root role, and
// turns authentication on. Clients made by Client afterwards log in as root.
func (e *Etcd) EnableAuth(t testing.TB, rootPassword string) {
	t.Helper()
	e.adminSteps(t, "", []adminStep{
		{"add user root", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.UserAdd(ctx, "root", rootPassword)
			return err
		}},
		{"grant role root", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.UserGrantRole(ctx, "root", "root")
			return err
		}},
		{"enable auth", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.AuthEnable(ctx)
			return err
		}},
	})
	e.mu.Lock()
	e.rootPass = rootPassword
	e.mu.Unlock()
}

// AddUser creates user with password and a role of the same name allowed
// to read and write every key under prefix (and nothing else). Call it
// after EnableAuth.
func (e *Etcd) AddUser(t testing.TB, user, password, prefix string) {
	t.Helper()
	e.adminSteps(t, " for "+user, []adminStep{
		{"add role", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.RoleAdd(ctx, user)
			return err
		}},
		{"grant permission", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.RoleGrantPermission(ctx, user, prefix, clientv3.GetPrefixRangeEnd(prefix),
				clientv3.PermissionType(clientv3.PermReadWrite))
			return err
		}},
		{"add user", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.UserAdd(ctx, user, password)
			return err
		}},
		{"grant role", func(ctx context.Context, cli *clientv3.Client) error {
			_, err := cli.UserGrantRole(ctx, user, user)
			return err
		}},
	})
}

// adminStep is one call of EnableAuth or AddUser, named for its error.
type adminStep struct {
	what string
	do   func(context.Context, *clientv3.Client) error
}

// adminSteps runs steps in order through one new Client within 30 s, and
// fails the test at the first that fails ("testenv: etcd WHAT<suffix>: ERR").
func (e *Etcd) adminSteps(t testing.TB, suffix string, steps []adminStep) {
	t.Helper()
	cli := e.Client(t)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, s := range steps {
		if err := s.do(ctx, cli); err != nil {
			t.Fatalf("testenv: etcd %s%s: %v", s.what, suffix, err)
		}
	}
}

// GRPCCount reads, from the server's /metrics, the gRPC server counter
// metric (grpc_server_started_total, grpc_server_msg_received_total…) of
// method (Authenticate, LeaseKeepAlive…): how many times the server has
// seen it since it started.
func (e *Etcd) GRPCCount(t testing.TB, metric, method string) int {
	t.Helper()
	body, err := httpDo(e.probeTLS(), "GET", e.scheme()+"://"+e.Endpoint()+"/metrics", "")
	if err != nil {
		t.Fatalf("testenv: etcd metrics: %v", err)
	}
	prefix := metric + `{grpc_method="` + method + `",`
	for line := range strings.Lines(body) {
		if !strings.HasPrefix(line, prefix) {
			continue
		}
		f := strings.Fields(line)
		n, err := strconv.ParseFloat(f[len(f)-1], 64)
		if err != nil {
			t.Fatalf("testenv: etcd metrics: %q: %v", line, err)
		}
		return int(n)
	}
	t.Fatalf("testenv: etcd metrics: no %s for %s", metric, method)
	return 0
}
