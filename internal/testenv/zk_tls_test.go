package testenv

import (
	"crypto/tls"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/go-zookeeper/zk"
)

// zkTLSClient connects to addrs over TLS with cfg; it does not wait for a
// session.
func zkTLSClient(t *testing.T, cfg *tls.Config, addrs ...string) *zk.Conn {
	t.Helper()
	dialer := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
	}
	c, _, err := zk.Connect(addrs, 4*time.Second, zk.WithDialer(dialer), zk.WithLogInfo(false), zk.WithLogger(quietZK{}))
	if err != nil {
		t.Fatalf("connect: %v", err)
	}
	t.Cleanup(c.Close)
	return c
}

// TestZKTLS: a server started with a CA serves on its TLS client port only
// (a client presenting a certificate of the CA creates a node; with
// ClientCertAuth a client without one is refused, and a plain client
// too), and keeps doing so after a restart.
func TestZKTLS(t *testing.T) {
	ca := NewCA(t, "test-ca")
	z := StartZKWith(t, ZKOptions{CA: ca, ClientCertAuth: true})
	if !strings.HasPrefix(z.URL(), "zks://127.0.0.1:") || z.Mode() != "standalone" {
		t.Fatalf("URL() = %q, mode %q; want zks://127.0.0.1:PORT, standalone", z.URL(), z.Mode())
	}
	c := zkTLSClient(t, z.ClientTLS(), z.Addr())
	if _, err := c.Create("/over-tls", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create over TLS: %v", err)
	}
	// Refusals, seen with a four-letter word (go-zookeeper retries a
	// refused connection without saying so).
	bare := ca.ClientTLS(t, nil)
	bare.ServerName = "127.0.0.1"
	for name, cfg := range map[string]*tls.Config{"no client certificate": bare, "no TLS": nil} {
		if out, err := fourLetter(cfg, z.Addr(), "srvr"); err == nil && strings.Contains(out, "Zookeeper version") {
			t.Errorf("%s: srvr answered %q; want a refusal", name, out)
		} else {
			t.Logf("%s: %q, %v", name, out, err)
		}
	}
	z.Kill(t)
	z.Start(t)
	b, _, err := zkTLSClient(t, z.ClientTLS(), z.Addr()).Get("/over-tls")
	if err != nil || string(b) != "v" {
		t.Fatalf("after the restart: %q, %v; want the node kept", b, err)
	}
}

// TestZKEnsembleTLS: an ensemble started with a CA elects a leader and
// serves on its members' TLS client ports; a client without a certificate
// is served too (ClientCertAuth off), and testenv's on every member.
func TestZKEnsembleTLS(t *testing.T) {
	ca := NewCA(t, "test-ca")
	e := StartZKEnsembleWith(t, ZKOptions{CA: ca})
	if want := "zks://" + strings.Join(e.Addrs(), ","); e.URL() != want {
		t.Fatalf("URL() = %q, want %q", e.URL(), want)
	}
	e.Leader(t)
	bare := ca.ClientTLS(t, nil)
	bare.ServerName = "127.0.0.1"
	if _, err := zkTLSClient(t, bare, e.Addrs()...).Create("/over-tls", []byte("v"), 0, zk.WorldACL(zk.PermAll)); err != nil {
		t.Fatalf("create over TLS without a client certificate: %v", err)
	}
	for _, m := range e.Members() {
		c := zkTLSClient(t, m.ClientTLS(), m.Addr())
		if _, err := c.Sync("/over-tls"); err != nil { // a follower may lag the create
			t.Fatalf("sync on %s: %v", m.Addr(), err)
		}
		b, _, err := c.Get("/over-tls")
		if err != nil || string(b) != "v" {
			t.Fatalf("read on %s: %q, %v", m.Addr(), b, err)
		}
	}
}
