package testenv

import (
	"crypto/tls"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// ZKOptions secure the ZooKeeper servers StartZKWith and
// StartZKEnsembleWith start. The zero value is StartZK: a plain client
// port.
type ZKOptions struct {
	// CA, when set, makes every server's client port speak only TLS
	// (secureClientPort, no clientPort; Netty's connection factory) with a
	// certificate CA issues for 127.0.0.1 and localhost, and trust client
	// certificates CA signed. ZooKeeper reads both as PEM files.
	CA *CA
	// ClientCertAuth (with CA) requires every client to present a
	// certificate signed by CA (ssl.clientAuth=need); otherwise the server
	// asks for one and takes a client without (want).
	ClientCertAuth bool
}

// zkTLSJars are the jars Netty's TLS handler needs that the zookeeper
// jar's manifest does not name (Debian's package leaves netty-codec out):
// without them every TLS connection fails with a NoClassDefFoundError of
// io.netty.handler.codec.ByteToMessageDecoder.
var zkTLSJars = []string{"/usr/share/java/netty-codec.jar"}

// zkTLS is one server's TLS set-up: its key store (key and certificate in
// one PEM file, as ZooKeeper wants it) and testenv's own client.
type zkTLS struct {
	keyStore string
	trust    string
	client   *tls.Config // presents testenv's own certificate
}

// newZKTLS issues the server's certificate and testenv's client one, and
// writes the server's key store into dir.
func newZKTLS(t testing.TB, ca *CA, dir string) *zkTLS {
	t.Helper()
	name := "zookeeper-" + filepath.Base(dir)
	srv := ca.Server(t, name)
	own := ca.Client(t, "testenv-"+name)
	var pem []byte
	for _, f := range []string{srv.KeyFile, srv.CertFile} {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatalf("testenv: zookeeper key store: %v", err)
		}
		pem = append(pem, b...)
	}
	zt := &zkTLS{keyStore: filepath.Join(dir, "keystore.pem"), trust: ca.CertFile, client: ca.ClientTLS(t, &own)}
	if err := os.WriteFile(zt.keyStore, pem, 0o600); err != nil {
		t.Fatalf("testenv: %v", fmt.Errorf("write the zookeeper key store: %w", err))
	}
	zt.client.ServerName = "127.0.0.1"
	return zt
}

// portConfig are the zoo.cfg lines of the client port: plain, or TLS. A
// line ZooKeeper does not know (serverCnxnFactory, ssl.*) becomes the
// system property "zookeeper." + its key.
func (z *ZK) portConfig() []string {
	port := strconv.Itoa(z.client)
	if z.tls == nil {
		return []string{"clientPort=" + port, "clientPortAddress=127.0.0.1"}
	}
	auth := "want"
	if z.opts.ClientCertAuth {
		auth = "need"
	}
	return []string{
		"secureClientPort=" + port,
		"secureClientPortAddress=127.0.0.1",
		"serverCnxnFactory=org.apache.zookeeper.server.NettyServerCnxnFactory",
		"ssl.keyStore.location=" + z.tls.keyStore,
		"ssl.keyStore.type=PEM",
		"ssl.trustStore.location=" + z.tls.trust,
		"ssl.trustStore.type=PEM",
		"ssl.clientAuth=" + auth,
		// The server would check a client certificate's names against
		// the client's address; the client certificates name nobody.
		"ssl.hostnameVerification=false",
	}
}

// clientTLS is testenv's own client configuration: nil without TLS, else
// it trusts the CA and presents a certificate of its own.
func (z *ZK) clientTLS() *tls.Config {
	if z.tls == nil {
		return nil
	}
	return z.tls.client.Clone()
}

// ClientTLS is the configuration testenv's own probes use (nil without
// TLS): it trusts the CA and presents a client certificate of testenv's.
// Tests give it to a client of their own.
func (z *ZK) ClientTLS() *tls.Config { return z.clientTLS() }

// URL is the --store URL of this server, without credentials:
// zk://127.0.0.1:PORT, or zks://… with TLS.
func (z *ZK) URL() string { return zkURL(z.tls != nil, z.Addr()) }

// URL is the --store URL of the ensemble (every member), without
// credentials: zk://…, or zks://… with TLS.
func (e *ZKEnsemble) URL() string {
	return zkURL(e.members[0].tls != nil, e.Addrs()...)
}

func zkURL(secure bool, addrs ...string) string {
	scheme := "zk://"
	if secure {
		scheme = "zks://"
	}
	return scheme + strings.Join(addrs, ",")
}
