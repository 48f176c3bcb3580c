package testenv

import (
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"
)

// ZooKeeper runs from Debian's zookeeper package: java with its jar (whose
// manifest names the rest of the classpath), the class zkServer.sh runs.
const (
	zkHow      = "`apt-get install -y zookeeper` (or `make zookeeper`)"
	zkJar      = "/usr/share/java/zookeeper.jar"
	zkMain     = "org.apache.zookeeper.server.quorum.QuorumPeerMain"
	zkTick     = 200 * time.Millisecond // tickTime: sessions of 400ms..4s
	zkReadyFor = time.Minute            // an ensemble's first election can take 20 s on a loaded host
)

// ZK is one ZooKeeper server run as a child process, alone (StartZK) or
// as a member of an ensemble (StartZKEnsemble). Its data directory
// persists: Kill then Start (or Restart) brings it back with its data on
// the same ports.
type ZK struct {
	lifecycle
	id        int
	dir       string
	client    int // client port (TLS only with opts.CA)
	peers     []int
	elections []int
	opts      ZKOptions
	tls       *zkTLS // nil without opts.CA
}

// ZKEnsemble is a 3-server ZooKeeper ensemble on loopback.
type ZKEnsemble struct {
	members []*ZK
}

// zkBinaries returns java and the zookeeper jar, or skips the test (fails
// it when $CI is set).
func zkBinaries(t testing.TB) (java, jar string) {
	t.Helper()
	jar = os.Getenv("ELECTD_ZOOKEEPER_JAR")
	if jar == "" {
		jar = zkJar
	}
	if _, err := os.Stat(jar); err != nil {
		missing(t, "zookeeper", "ELECTD_ZOOKEEPER_JAR", zkHow)
	}
	java, err := exec.LookPath("java")
	if err != nil {
		missing(t, "java", "PATH", "`apt-get install -y default-jre-headless`")
	}
	return java, jar
}

// StartZK starts a standalone ZooKeeper server (tickTime 200ms) on a free
// loopback port, with its data in a temporary directory, and waits until
// it serves. It is killed in t.Cleanup. Without Debian's zookeeper package
// the test is skipped (failed when $CI is set).
func StartZK(t testing.TB) *ZK {
	t.Helper()
	return StartZKWith(t, ZKOptions{})
}

// StartZKWith is StartZK with a TLS client port (see ZKOptions).
func StartZKWith(t testing.TB, opts ZKOptions) *ZK {
	t.Helper()
	zs := startZKs(t, 1, opts)
	return zs[0]
}

// StartZKEnsemble starts a 3-server ensemble on free loopback ports and
// waits until every member serves.
func StartZKEnsemble(t testing.TB) *ZKEnsemble {
	t.Helper()
	return StartZKEnsembleWith(t, ZKOptions{})
}

// StartZKEnsembleWith is StartZKEnsemble with TLS client ports (see
// ZKOptions); the members speak to each other in clear text.
func StartZKEnsembleWith(t testing.TB, opts ZKOptions) *ZKEnsemble {
	t.Helper()
	return &ZKEnsemble{members: startZKs(t, 3, opts)}
}

func startZKs(t testing.TB, n int, opts ZKOptions) []*ZK {
	t.Helper()
	java, jar := zkBinaries(t)
	zs := make([]*ZK, n)
	for i := range zs {
		z := &ZK{id: i + 1, dir: t.TempDir(), opts: opts}
		if opts.CA != nil {
			z.tls = newZKTLS(t, opts.CA, z.dir)
		}
		if err := os.MkdirAll(filepath.Join(z.dir, "data"), 0o755); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		if err := os.WriteFile(filepath.Join(z.dir, "data", "myid"), []byte(strconv.Itoa(z.id)+"\n"), 0o644); err != nil {
			t.Fatalf("testenv: %v", err)
		}
		z.srv = &server{
			name:    fmt.Sprintf("zookeeper %d", z.id),
			bin:     java,
			logPath: filepath.Join(z.dir, "zookeeper.log"),
			args:    func() []string { return z.args(t, jar) },
			probe:   z.probe,
			ready:   zkReadyFor,
		}
		t.Cleanup(func() { z.srv.cleanup(t) })
		zs[i] = z
	}
	// New ports for every server after a collision (another process took
	// one between the choice and the bind), as firstStart does.
	for try := 1; ; try++ {
		if err := pickZKPorts(zs); err != nil {
			t.Fatalf("testenv: zookeeper ports: %v", err)
		}
		i, err := startEach(zs)
		if err == nil {
			return zs
		}
		killEach(t, zs)
		if !errors.Is(err, errPortInUse) || try == startTries {
			t.Fatalf("testenv: %v (try %d)\n%s", err, try, zs[i].srv.tail())
		}
		t.Logf("testenv: %v; retrying with new ports", err)
	}
}

// pickZKPorts gives each server of zs a client port and, in an ensemble,
// the peer and election ports of every member.
func pickZKPorts(zs []*ZK) error {
	ports, err := freePorts(3 * len(zs))
	if err != nil {
		return err
	}
	for i, z := range zs {
		z.client, z.peers, z.elections = ports[3*i], nil, nil
		if len(zs) > 1 {
			for j := range zs {
				z.peers = append(z.peers, ports[3*j+1])
				z.elections = append(z.elections, ports[3*j+2])
			}
		}
	}
	return nil
}

// startEach starts every server of zs at once (an ensemble member serves
// only once a quorum runs) and waits until each serves; on failure it
// returns one that failed and why (a port collision first).
func startEach(zs []*ZK) (int, error) {
	errs := make([]error, len(zs))
	var wg sync.WaitGroup
	for i, z := range zs {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = z.srv.start()
		}()
	}
	wg.Wait()
	failed := -1
	for i, err := range errs {
		if errors.Is(err, errPortInUse) {
			return i, err // the one a retry on new ports fixes
		}
		if err != nil && failed < 0 {
			failed = i
		}
	}
	if failed >= 0 {
		return failed, errs[failed]
	}
	return 0, nil
}

// startAll is startEach for servers whose ports are fixed (a restart): a
// failure fails t.
func startAll(t testing.TB, zs []*ZK) {
	t.Helper()
	if i, err := startEach(zs); err != nil {
		t.Fatalf("testenv: %v\n%s", err, zs[i].srv.tail())
	}
}

// args writes the server's configuration and returns java's command line.
func (z *ZK) args(t testing.TB, jar string) []string {
	cfg := []string{
		"tickTime=" + strconv.Itoa(int(zkTick/time.Millisecond)),
		"initLimit=10",
		"syncLimit=5",
		"dataDir=" + filepath.Join(z.dir, "data"),
		"admin.enableServer=false",
		"4lw.commands.whitelist=*",
		"maxClientCnxns=0", // the suites open more than the default 60 connections from 127.0.0.1
		// As the etcd cluster's --unsafe-no-fsync: with every suite's servers
		// on the 2-core CI machine at once, fsync of the transaction log made
		// a renewal's write (elector/zk's stamp) take most of a 2s term's
		// window, which tests nothing of electd. What a server writes still
		// reaches the page cache: a server killed and started keeps its data.
		"forceSync=no",
	}
	cfg = append(cfg, z.portConfig()...)
	for j := range z.peers {
		cfg = append(cfg, fmt.Sprintf("server.%d=127.0.0.1:%d:%d", j+1, z.peers[j], z.elections[j]))
	}
	path := filepath.Join(z.dir, "zoo.cfg")
	if err := os.WriteFile(path, []byte(strings.Join(cfg, "\n")+"\n"), 0o644); err != nil {
		t.Errorf("testenv: write %s: %v", path, err)
	}
	cp := []string{jar, "/usr/share/java/slf4j-simple.jar"}
	if z.tls != nil {
		cp = append(cp, zkTLSJars...)
	}
	return []string{"-Xmx256m", "-Dzookeeper.log.dir=" + z.dir, "-Dorg.slf4j.simpleLogger.defaultLogLevel=warn",
		"-cp", strings.Join(cp, string(os.PathListSeparator)), zkMain, path}
}

// probe succeeds when the server serves ("srvr" names its mode) and the
// server on the port is ours ("conf" names our data directory).
func (z *ZK) probe(int) error {
	out, err := fourLetter(z.clientTLS(), z.Addr(), "srvr")
	if err != nil {
		return err
	}
	if !strings.Contains(out, "Mode: ") {
		return fmt.Errorf("zookeeper on %s does not serve: %q", z.Addr(), strings.TrimSpace(out))
	}
	conf, err := fourLetter(z.clientTLS(), z.Addr(), "conf")
	if err != nil {
		return err
	}
	if !strings.Contains(conf, filepath.Join(z.dir, "data")) {
		return fmt.Errorf("zookeeper on %s is not ours (no dataDir %s)", z.Addr(), filepath.Join(z.dir, "data"))
	}
	return nil
}

// Mode is the server's role as "srvr" tells it: standalone, leader or
// follower ("" when it does not answer or serve).
func (z *ZK) Mode() string {
	out, err := fourLetter(z.clientTLS(), z.Addr(), "srvr")
	if err != nil {
		return ""
	}
	for line := range strings.SplitSeq(out, "\n") {
		if m, ok := strings.CutPrefix(line, "Mode: "); ok {
			return strings.TrimSpace(m)
		}
	}
	return ""
}

// fourLetter sends a four-letter word and reads the answer, over TLS when
// tlsCfg is not nil.
func fourLetter(tlsCfg *tls.Config, addr, word string) (string, error) {
	c, err := dial(tlsCfg, addr)
	if err != nil {
		return "", err
	}
	defer c.Close()
	if err := c.SetDeadline(time.Now().Add(probeTimeout)); err != nil {
		return "", err
	}
	if _, err := io.WriteString(c, word); err != nil {
		return "", fmt.Errorf("%s to %s: %w", word, addr, err)
	}
	b, err := io.ReadAll(c)
	if err != nil {
		return "", fmt.Errorf("%s to %s: %w", word, addr, err)
	}
	return string(b), nil
}

// Addr is the server's client address, "127.0.0.1:PORT".
func (z *ZK) Addr() string { return "127.0.0.1:" + strconv.Itoa(z.client) }

// Members are the ensemble's servers.
func (e *ZKEnsemble) Members() []*ZK { return e.members }

// Addrs are the members' client addresses.
func (e *ZKEnsemble) Addrs() []string {
	var as []string
	for _, m := range e.members {
		as = append(as, m.Addr())
	}
	return as
}

// Leader is the member that leads the ensemble now, waiting for one.
func (e *ZKEnsemble) Leader(t testing.TB) *ZK {
	t.Helper()
	deadline := time.Now().Add(zkReadyFor)
	for {
		for _, m := range e.members {
			if m.Mode() == "leader" {
				return m
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("testenv: no zookeeper leader after %s", zkReadyFor)
		}
		time.Sleep(pollInterval) // polling the members, not synchronising
	}
}

// Kill SIGKILLs every member.
func (e *ZKEnsemble) Kill(t testing.TB) { t.Helper(); killEach(t, e.members) }

// Start starts every stopped member at once, on its data, and waits until
// each serves.
func (e *ZKEnsemble) Start(t testing.TB) {
	t.Helper()
	var stopped []*ZK
	for _, m := range e.members {
		if m.Pid() == 0 {
			stopped = append(stopped, m)
		}
	}
	startAll(t, stopped)
}

// Restart kills every member and starts them again on their data.
func (e *ZKEnsemble) Restart(t testing.TB) { t.Helper(); e.Kill(t); e.Start(t) }
