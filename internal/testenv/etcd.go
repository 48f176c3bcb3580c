package testenv

import (
	"crypto/tls"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
)

const etcdHow = "run `make etcd`, or `go build -o bin/etcd go.etcd.io/etcd/server/v3` in the module root"

var etcdSeq atomic.Int64 // makes member names unique within this process

// Etcd is a single-member etcd server run as a child process. Start and
// Restart keep its data dir and ports; its log is at level warn. etcd drains
// gRPC streams first: with a watch open, Stop takes about 5 s (measured);
// Kill is immediate.
type Etcd struct {
	lifecycle
	name       string
	dataDir    string
	clientPort int
	peerPort   int

	tls     *etcdTLS // nil: plain HTTP on the client port
	noFsync bool     // --unsafe-no-fsync (the kube-apiserver's etcd)

	mu       sync.Mutex
	rootPass string // set by EnableAuth: Client then logs in as root
}

// StartEtcd starts etcd on free loopback ports with a fresh data dir and
// waits until it is healthy. It is killed in t.Cleanup. A missing binary
// skips the test (fails it when $CI is set).
func StartEtcd(t testing.TB) *Etcd {
	t.Helper()
	return startEtcd(t, nil, false)
}

func startEtcd(t testing.TB, tc *etcdTLS, noFsync bool) *Etcd {
	t.Helper()
	var candidates []string
	if root, err := ModuleRoot(); err == nil {
		candidates = append(candidates, filepath.Join(root, "bin", "etcd"))
	}
	bin := binary(t, "ELECTD_ETCD_BIN", "etcd", candidates, etcdHow)
	dir := t.TempDir()
	e := &Etcd{
		name:    fmt.Sprintf("testenv-%d-%d", os.Getpid(), etcdSeq.Add(1)),
		dataDir: filepath.Join(dir, "data"),
		tls:     tc,
		noFsync: noFsync,
	}
	e.srv = &server{
		name:    "etcd",
		bin:     bin,
		logPath: filepath.Join(dir, "etcd.log"),
		args:    e.args,
		probe:   e.probe,
	}
	t.Cleanup(func() { e.srv.cleanup(t) }) // before t.TempDir's removal (LIFO)
	firstStart(t, e.srv, func() error {
		ports, err := freePorts(2)
		if err != nil {
			return err
		}
		e.clientPort, e.peerPort = ports[0], ports[1]
		return os.RemoveAll(e.dataDir) // a failed try may have left one
	})
	return e
}

// Endpoint returns the client address, "127.0.0.1:PORT" (HTTPS when the
// server was started by StartEtcdTLS).
func (e *Etcd) Endpoint() string { return "127.0.0.1:" + strconv.Itoa(e.clientPort) }

// DataDir returns the server's data directory, kept across restarts.
func (e *Etcd) DataDir() string { return e.dataDir }

// Client returns a client of this server alone, closed in t.Cleanup. Created
// after StartEtcd with the same t (or a subtest), it is closed before the
// server is stopped.
func (e *Etcd) Client(t testing.TB) *clientv3.Client {
	t.Helper()
	cfg := clientv3.Config{Endpoints: []string{e.Endpoint()}}
	if e.tls != nil {
		cfg.TLS = e.tls.client.Clone()
	}
	if pw := e.rootPassword(); pw != "" {
		cfg.Username, cfg.Password = "root", pw
	}
	return dialEtcd(t, cfg)
}

// EtcdClient returns a plain client of the etcd at addr (a server, or a
// fault proxy in front of one), closed in t.Cleanup.
func EtcdClient(t testing.TB, addr string) *clientv3.Client {
	t.Helper()
	return dialEtcd(t, clientv3.Config{Endpoints: []string{addr}})
}

func dialEtcd(t testing.TB, cfg clientv3.Config) *clientv3.Client {
	t.Helper()
	cfg.DialTimeout, cfg.Logger = 5*time.Second, zap.NewNop()
	cli, err := clientv3.New(cfg)
	if err != nil {
		t.Fatalf("testenv: etcd client: %v", err)
	}
	t.Cleanup(func() { _ = cli.Close() })
	return cli
}

func (e *Etcd) args() []string {
	client := e.scheme() + "://" + e.Endpoint()
	peer := "http://127.0.0.1:" + strconv.Itoa(e.peerPort)
	args := []string{
		"--name", e.name,
		"--data-dir", e.dataDir,
		"--listen-client-urls", client,
		"--advertise-client-urls", client,
		"--listen-peer-urls", peer,
		"--initial-advertise-peer-urls", peer,
		"--initial-cluster", e.name + "=" + peer,
		"--heartbeat-interval", "10",
		"--election-timeout", "100",
		"--log-level", "warn",
	}
	if e.noFsync {
		args = append(args, "--unsafe-no-fsync")
	}
	if e.tls != nil {
		args = append(args,
			"--cert-file", e.tls.server.CertFile,
			"--key-file", e.tls.server.KeyFile,
			"--trusted-ca-file", e.tls.ca.CertFile,
			"--client-cert-auth",
		)
	}
	return args
}

func (e *Etcd) scheme() string {
	if e.tls != nil {
		return "https"
	}
	return "http"
}

func (e *Etcd) probeTLS() *tls.Config {
	if e.tls == nil {
		return nil
	}
	return e.tls.client
}

// probe succeeds when /health says true and the member list shows that the
// server answering is ours (not another process that got the port).
func (e *Etcd) probe(int) error {
	base := e.scheme() + "://" + e.Endpoint()
	body, err := httpDo(e.probeTLS(), "GET", base+"/health", "")
	if err != nil {
		return fmt.Errorf("etcd health: %w", err)
	}
	var health struct{ Health string }
	if err := json.Unmarshal([]byte(body), &health); err != nil || health.Health != "true" {
		return fmt.Errorf("etcd health: %s", strings.TrimSpace(body))
	}
	body, err = httpDo(e.probeTLS(), "POST", base+"/v3/cluster/member/list", "{}")
	if err != nil {
		return fmt.Errorf("etcd member list: %w", err)
	}
	var list struct{ Members []struct{ Name string } }
	if err := json.Unmarshal([]byte(body), &list); err != nil {
		return fmt.Errorf("etcd member list: %w", err)
	}
	for _, m := range list.Members {
		if m.Name == e.name {
			return nil
		}
	}
	return fmt.Errorf("etcd member list: %s is not among %s", e.name, body)
}
