package testenv

import (
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// CA is a throw-away certificate authority for one test. Its certificates
// and keys are PEM files in a temporary directory, removed with the test.
type CA struct {
	// CertFile is the CA certificate (PEM): the file for --ca-file,
	// --trusted-ca-file or --tls-ca-cert-file.
	CertFile string

	name string
	cert *x509.Certificate
	key  *ecdsa.PrivateKey
	dir  string
}

// KeyPair names a certificate and its private key, both PEM files.
type KeyPair struct {
	CertFile, KeyFile string
}

// NewCA creates a CA named name (its subject's common name).
func NewCA(t testing.TB, name string) *CA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: CA key: %v", err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: name, Organization: []string{"electd tests"}},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
		IsCA:                  true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatalf("testenv: CA certificate: %v", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatalf("testenv: parse CA certificate: %v", err)
	}
	ca := &CA{name: name, cert: cert, key: key, dir: t.TempDir()}
	ca.CertFile = filepath.Join(ca.dir, "ca.crt")
	writePEM(t, ca.CertFile, "CERTIFICATE", der)
	return ca
}

// Server issues a certificate for 127.0.0.1, ::1 and localhost, usable by a
// server and also as a client (etcd's gRPC gateway presents the server's
// certificate to the server itself when --client-cert-auth is on).
func (ca *CA) Server(t testing.TB, name string) KeyPair {
	t.Helper()
	return ca.issue(t, name, name, &x509.Certificate{
		DNSNames:    []string{"localhost"},
		IPAddresses: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback},
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth, x509.ExtKeyUsageClientAuth},
	})
}

// Client issues a client certificate whose common name is name (etcd maps
// it to a user when auth is on and no password is given).
func (ca *CA) Client(t testing.TB, name string) KeyPair {
	t.Helper()
	return ca.issue(t, name, name, &x509.Certificate{
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// anonymousClient issues a client certificate with an empty common name,
// stored as file.crt and file.key. etcd's HTTP gateway refuses certificates
// with a common name once auth is on; testenv's probe uses this one.
func (ca *CA) anonymousClient(t testing.TB, file string) KeyPair {
	t.Helper()
	return ca.issue(t, file, "", &x509.Certificate{
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	})
}

// Pool returns a pool holding this CA's certificate.
func (ca *CA) Pool() *x509.CertPool {
	p := x509.NewCertPool()
	p.AddCert(ca.cert)
	return p
}

// ClientTLS returns a client configuration trusting this CA and, when kp is
// not nil, presenting kp.
func (ca *CA) ClientTLS(t testing.TB, kp *KeyPair) *tls.Config {
	t.Helper()
	cfg := &tls.Config{RootCAs: ca.Pool(), MinVersion: tls.VersionTLS12}
	if kp != nil {
		cert, err := tls.LoadX509KeyPair(kp.CertFile, kp.KeyFile)
		if err != nil {
			t.Fatalf("testenv: load key pair %s: %v", kp.CertFile, err)
		}
		cfg.Certificates = []tls.Certificate{cert}
	}
	return cfg
}

// issue writes a certificate with common name cn, and its key, as
// file.crt and file.key.
func (ca *CA) issue(t testing.TB, file, cn string, tmpl *x509.Certificate) KeyPair {
	t.Helper()
	name := file
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatalf("testenv: key for %s: %v", name, err)
	}
	tmpl.SerialNumber = serial(t)
	tmpl.Subject = pkix.Name{CommonName: cn, Organization: []string{"electd tests"}}
	tmpl.NotBefore = time.Now().Add(-time.Hour)
	tmpl.NotAfter = time.Now().Add(24 * time.Hour)
	tmpl.KeyUsage = x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatalf("testenv: certificate for %s: %v", name, err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatalf("testenv: encode key of %s: %v", name, err)
	}
	kp := KeyPair{
		CertFile: filepath.Join(ca.dir, name+".crt"),
		KeyFile:  filepath.Join(ca.dir, name+".key"),
	}
	writePEM(t, kp.CertFile, "CERTIFICATE", der)
	writePEM(t, kp.KeyFile, "PRIVATE KEY", keyDER)
	return kp
}

func serial(t testing.TB) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 120))
	if err != nil {
		t.Fatalf("testenv: serial number: %v", err)
	}
	return n
}

func writePEM(t testing.TB, path, typ string, der []byte) {
	t.Helper()
	b := pem.EncodeToMemory(&pem.Block{Type: typ, Bytes: der})
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatalf("testenv: %v", fmt.Errorf("write %s: %w", path, err))
	}
}
