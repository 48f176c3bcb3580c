package main

import (
	"context"
	"errors"
	"net/http"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/electd/electd/internal/testenv"
)

// storeCase is one `electd leader` against a secured store: it must either
// reach the store (exit 3: no leader yet) or be refused with exit 2 and one
// line naming field.
type storeCase struct {
	name  string
	store string   // --store
	args  []string // more flags
	env   []string
	field string // "" = must connect
}

func runStoreCases(t *testing.T, secret string, cases []storeCase) {
	t.Helper()
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			args := append([]string{"electd", "leader", "--election", "e", "--timeout", "5s", "--store", tc.store}, tc.args...)
			start := time.Now()
			r := runElectd(t, 30*time.Second, tc.env, args[1:]...)
			if secret != "" && strings.Contains(r.stdout+r.stderr, secret) {
				t.Errorf("the password appears in the output:\n%s", r)
			}
			if tc.field == "" {
				if r.code != exitNoLeader {
					t.Fatalf("want exit %d (reached the store, no leader):\n%s", exitNoLeader, r)
				}
				return
			}
			lines := strings.Split(strings.TrimSpace(r.stderr), "\n")
			want := "electd: invalid " + tc.field + ": "
			if r.code != exitUsage || len(lines) != 1 || !strings.HasPrefix(lines[0], want) {
				t.Fatalf("want exit %d and one line %q…:\n%s", exitUsage, want, r)
			}
			t.Logf("%s (after %v)", lines[0], time.Since(start).Round(time.Millisecond))
		})
	}
}

func TestEtcdTLSAndAuth(t *testing.T) {
	ca, other := testenv.NewCA(t, "store-ca"), testenv.NewCA(t, "other-ca")
	e := testenv.StartEtcdTLS(t, ca)
	good, foreign := ca.Client(t, "electd"), other.Client(t, "electd")
	plain := testenv.StartEtcd(t)

	tlsArgs := func(caFile string, kp *testenv.KeyPair) []string {
		a := []string{"--ca-file", caFile}
		if kp != nil {
			a = append(a, "--cert-file", kp.CertFile, "--key-file", kp.KeyFile)
		}
		return a
	}
	runStoreCases(t, "", []storeCase{
		{name: "client certificate", store: e.URL(), args: tlsArgs(ca.CertFile, &good)},
		{name: "server not trusted", store: e.URL(), args: tlsArgs(other.CertFile, &good), field: "ca-file"},
		{name: "system roots only", store: e.URL(), field: "ca-file"},
		{name: "no client certificate", store: e.URL(), args: tlsArgs(ca.CertFile, nil), field: "cert-file"},
		{name: "client certificate of another CA", store: e.URL(), args: tlsArgs(ca.CertFile, &foreign), field: "cert-file"},
		{name: "wrong server name", store: e.URL(), args: append(tlsArgs(ca.CertFile, &good), "--tls-server-name", "etcd.example"), field: "tls-server-name"},
		{name: "TLS to a plain server", store: "etcds://" + plain.Endpoint(), args: tlsArgs(ca.CertFile, &good), field: "store"},
		{name: "TLS flag with a plain URL", store: plain.URL(), args: tlsArgs(ca.CertFile, nil), field: "ca-file"},
		{name: "plain URL to a TLS server", store: "etcd://" + e.Endpoint(), field: "store"},
		{name: "certificate without key", store: e.URL(), args: []string{"--ca-file", ca.CertFile, "--cert-file", good.CertFile}, field: "key-file"},
		{name: "CA file not PEM", store: e.URL(), args: tlsArgs(good.KeyFile, &good), field: "ca-file"},
	})

	const root, secret = "root-pw-5f1d", "electd-pw-8c2a"
	e.EnableAuth(t, root)
	e.AddUser(t, "electd", secret, "/electd/")
	e.AddUser(t, "stranger", secret, "/other/")
	pwFile := testenv.WriteFile(t, "password", secret+"\n")
	wrongFile := testenv.WriteFile(t, "wrong", "not-"+secret+"\n")
	userURL := strings.Replace(e.URL(), "://", "://electd@", 1)
	withPW := strings.Replace(e.URL(), "://", "://electd:"+secret+"@", 1)
	tls := tlsArgs(ca.CertFile, &good)
	nobody := ca.Client(t, "nobody") // names no etcd user
	anon := tlsArgs(ca.CertFile, &nobody)
	runStoreCases(t, secret, []storeCase{
		{name: "user from the certificate's common name", store: e.URL(), args: tls},
		{name: "password in the URL", store: withPW, args: tls},
		{name: "password from the environment", store: userURL, args: tls, env: []string{"ELECTD_STORE_PASSWORD=" + secret}},
		{name: "password from a file", store: userURL, args: append(tls, "--store-password-file", pwFile)},
		{name: "wrong password", store: userURL, args: append(tls, "--store-password-file", wrongFile), field: "store-password-file"},
		{name: "user, server not trusted", store: userURL, args: append(tlsArgs(other.CertFile, &good), "--store-password-file", pwFile), field: "ca-file"},
		{name: "user, system roots only", store: withPW, field: "ca-file"},
		{name: "wrong password in the URL", store: strings.Replace(withPW, secret, "x"+secret, 1), args: tls, field: "store"},
		{name: "no credentials", store: e.URL(), args: anon, field: "store"},
		{name: "user without a password", store: userURL, args: tls, field: "store"},
		{name: "password in two places", store: withPW, args: tls, env: []string{"ELECTD_STORE_PASSWORD=" + secret}, field: "$ELECTD_STORE_PASSWORD"},
		{name: "user without permission", store: strings.Replace(withPW, "electd:", "stranger:", 1), args: tls, field: "store"},
	})
}

func TestRedisTLSAndACL(t *testing.T) {
	ca, other := testenv.NewCA(t, "store-ca"), testenv.NewCA(t, "other-ca")
	const secret = "electd-pw-93be"
	r := testenv.StartRedisWith(t, testenv.RedisOptions{CA: ca, ClientCertAuth: true, Users: []testenv.RedisUser{
		{Name: "electd", Password: secret},
		{Name: "nopings", Password: secret, Rules: []string{"~electd:*", "+@all", "-ping"}},
	}})
	plain := testenv.StartRedis(t)
	good, foreign := ca.Client(t, "electd"), other.Client(t, "electd")
	tls := []string{"--ca-file", ca.CertFile, "--cert-file", good.CertFile, "--key-file", good.KeyFile}
	userURL := strings.Replace(r.URL(), "://", "://electd@", 1)
	withPW := strings.Replace(r.URL(), "://", "://electd:"+secret+"@", 1)
	pwFile := testenv.WriteFile(t, "password", secret+"\n")
	runStoreCases(t, secret, []storeCase{
		{name: "password in the URL", store: withPW, args: tls},
		{name: "password from the environment", store: userURL, args: tls, env: []string{"ELECTD_STORE_PASSWORD=" + secret}},
		{name: "password from a file", store: userURL, args: append(tls, "--store-password-file", pwFile)},
		{name: "wrong password", store: userURL, args: tls, env: []string{"ELECTD_STORE_PASSWORD=x" + secret}, field: "$ELECTD_STORE_PASSWORD"},
		{name: "no credentials", store: r.URL(), args: tls, field: "store"},
		{name: "ACL denies PING", store: strings.Replace(withPW, "electd:", "nopings:", 1), args: tls, field: "store"},
		{name: "server not trusted", store: withPW, args: []string{"--ca-file", other.CertFile, "--cert-file", good.CertFile, "--key-file", good.KeyFile}, field: "ca-file"},
		{name: "no client certificate", store: withPW, args: []string{"--ca-file", ca.CertFile}, field: "cert-file"},
		{name: "client certificate of another CA", store: withPW, args: []string{"--ca-file", ca.CertFile, "--cert-file", foreign.CertFile, "--key-file", foreign.KeyFile}, field: "cert-file"},
		{name: "wrong server name", store: withPW, args: append(tls, "--tls-server-name", "redis.example"), field: "tls-server-name"},
		{name: "TLS to a plain server", store: "rediss://" + plain.Addr(), args: tls, field: "store"},
		{name: "plain URL to a TLS server", store: "redis://" + r.Addr(), field: "store"},
	})
}

// TestRedisCredentialsRevoked: a user deleted while electd leads (Redis
// disconnects its clients) ends the term; electd exits 1 with the store's
// refusal, and a restart then exits 2 at once.
func TestRedisCredentialsRevoked(t *testing.T) {
	const secret = "electd-pw-77aa"
	r := testenv.StartRedisWith(t, testenv.RedisOptions{Users: []testenv.RedisUser{{Name: "electd", Password: secret}}})
	env := []string{"ELECTD_STORE_PASSWORD=" + secret}
	store := strings.Replace(r.URL(), "://", "://electd@", 1)
	listen := "127.0.0.1:" + strconv.Itoa(testenv.FreePort(t))
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	cmd := electdCmd(ctx, t, env, "run", "--store", store, "--election", "revoke", "--id", "n1", "--ttl", "2s",
		"--listen", listen, "--", "sleep", "600")
	var errb lockedBuffer
	cmd.Stderr = &errb
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(20 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		if code, _ := httpGet(t, "http://"+listen+"/readyz"); code == http.StatusOK {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("electd did not lead:\n%s", errb.String())
		}
	}
	if err := r.Client(t).Do(ctx, "ACL", "DELUSER", "electd").Err(); err != nil {
		t.Fatalf("ACL DELUSER: %v", err)
	}
	err := cmd.Wait()
	var ee *exec.ExitError
	if !errors.As(err, &ee) || ee.ExitCode() != exitFailure {
		t.Fatalf("electd after its user was deleted: %v, want exit %d\n%s", err, exitFailure, errb.String())
	}
	last := strings.TrimSpace(errb.String())
	last = last[strings.LastIndex(last, "\n")+1:]
	if !strings.HasPrefix(last, "electd: ") || !strings.Contains(last, "WRONGPASS") || strings.Contains(errb.String(), secret) {
		t.Fatalf("last line %q: want the store's refusal, without the password\n%s", last, errb.String())
	}
	t.Logf("exit 1: %s", last)

	res := runElectd(t, 30*time.Second, env, "leader", "--store", store, "--election", "revoke")
	if res.code != exitUsage {
		t.Fatalf("restart: want exit %d\n%s", exitUsage, res)
	}
}
