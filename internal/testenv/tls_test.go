package testenv

import (
	"context"
	"crypto/tls"
	"strings"
	"testing"
	"time"

	"github.com/redis/go-redis/v9"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

func TestEtcdTLSAndAuth(t *testing.T) {
	ca := NewCA(t, "test-ca")
	e := StartEtcdTLS(t, ca)
	if !strings.HasPrefix(e.URL(), "etcds://127.0.0.1:") {
		t.Fatalf("URL() = %q, want etcds://127.0.0.1:PORT", e.URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := e.Client(t).Put(ctx, "k", "v"); err != nil {
		t.Fatalf("put over TLS: %v", err)
	}

	// A client that trusts the CA but has no certificate is refused.
	bare, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 2 * time.Second,
		TLS: ca.ClientTLS(t, nil), Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client: %v", err)
	}
	defer bare.Close()
	short, cancelShort := context.WithTimeout(ctx, 2*time.Second)
	defer cancelShort()
	if _, err := bare.Get(short, "k"); err == nil {
		t.Fatal("get without a client certificate succeeded; want a refusal")
	}

	e.EnableAuth(t, "root-secret")
	e.AddUser(t, "electd", "user-secret", "/electd/")
	if _, err := e.Client(t).Get(ctx, "k"); err != nil {
		t.Fatalf("get as root: %v", err)
	}
	own := ca.Client(t, "someone")
	user, err := clientv3.New(clientv3.Config{Endpoints: []string{e.Endpoint()}, DialTimeout: 5 * time.Second,
		TLS: ca.ClientTLS(t, &own), Username: "electd", Password: "user-secret", Logger: zap.NewNop()})
	if err != nil {
		t.Fatalf("client as electd: %v", err)
	}
	defer user.Close()
	if _, err := user.Put(ctx, "/electd/x", "v"); err != nil {
		t.Fatalf("put /electd/x as electd: %v", err)
	}
	if _, err := user.Put(ctx, "/other", "v"); err == nil {
		t.Fatal("put /other as electd succeeded; want permission denied")
	}
	e.Restart(t) // the probe still works with auth on
}

func TestRedisTLSAndACL(t *testing.T) {
	ca := NewCA(t, "test-ca")
	r := StartRedisWith(t, RedisOptions{CA: ca, ClientCertAuth: true,
		Users: []RedisUser{{Name: "electd", Password: "user-secret"}}})
	if !strings.HasPrefix(r.URL(), "rediss://127.0.0.1:") {
		t.Fatalf("URL() = %q, want rediss://127.0.0.1:PORT", r.URL())
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := r.Client(t).Set(ctx, "k", "v", 0).Err(); err != nil {
		t.Fatalf("set as testenv's admin: %v", err)
	}
	own := ca.Client(t, "electd")
	tlsOK := ca.ClientTLS(t, &own)
	tlsOK.ServerName = "127.0.0.1"
	tlsNoCert := ca.ClientTLS(t, nil)
	tlsNoCert.ServerName = "127.0.0.1"
	tests := []struct {
		name       string
		tls        *tls.Config
		user, pass string
		key        string
		ok         bool
	}{
		{"user on its keys", tlsOK, "electd", "user-secret", "electd:{e}:x", true},
		{"user outside its keys", tlsOK, "electd", "user-secret", "other", false},
		{"wrong password", tlsOK, "electd", "nope", "electd:{e}:x", false},
		{"default user is off", tlsOK, "", "", "electd:{e}:x", false},
		{"no client certificate", tlsNoCert, "electd", "user-secret", "electd:{e}:x", false},
		{"no TLS", nil, "electd", "user-secret", "electd:{e}:x", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			cli := redis.NewClient(&redis.Options{Addr: r.Addr(), TLSConfig: tc.tls, Username: tc.user,
				Password: tc.pass, MaxRetries: -1, DialTimeout: 2 * time.Second, ReadTimeout: 2 * time.Second})
			defer cli.Close()
			err := cli.Set(ctx, tc.key, "v", 0).Err()
			if (err == nil) != tc.ok {
				t.Fatalf("set %s: err = %v, want ok=%v", tc.key, err, tc.ok)
			}
		})
	}
	r.Restart(t)
}
