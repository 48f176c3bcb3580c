package zk_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	gozk "github.com/go-zookeeper/zk"

	"github.com/electd/electd/elector"
	"github.com/electd/electd/elector/backend"
	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/zk"
	"github.com/electd/electd/internal/testenv"
	"github.com/electd/electd/store"
)

// These tests go through the store package, as electd does: the zks://
// URL of --store, the CA and client certificate of --ca-file, --cert-file
// and --key-file (README, docs/OPERATIONS.md), the redacting logger and
// errors.

// logBuffer is a log's text, written from several goroutines.
type logBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// debugLog is a debug-level text logger writing into a new logBuffer.
func debugLog() (*logBuffer, *slog.Logger) {
	buf := &logBuffer{}
	return buf, slog.New(slog.NewTextHandler(buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// renewals counts a candidate's renewals and keeps its store errors' text.
type renewals struct {
	n    atomic.Int64
	mu   sync.Mutex
	errs []string
}

func (r *renewals) StoreError(op string, err error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.errs = append(r.errs, op+": "+err.Error())
}
func (r *renewals) StoreAnswered(string)       {}
func (r *renewals) Renewed(took time.Duration) { r.n.Add(1) }

func (r *renewals) errors() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.errs...)
}

// openStore is store.Open with a deadline; the store is closed when the
// test ends.
func openStore(t *testing.T, o store.Options, log *slog.Logger) (*store.Store, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	s, err := store.Open(ctx, o, log)
	if err != nil {
		return nil, err
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("close the store: %v", err)
		}
	})
	return s, nil
}

// candidateOn makes candidate c on s, closed when the test ends (before
// the store: cleanups run last first).
func candidateOn(t *testing.T, s *store.Store, c elector.Candidate) elector.Locker {
	t.Helper()
	e, err := s.NewElector(c)
	if err != nil {
		t.Fatalf("new elector %s: %v", c.ID, err)
	}
	t.Cleanup(func() {
		if err := e.Close(); err != nil {
			t.Errorf("close elector %s: %v", c.ID, err)
		}
	})
	return e
}

// TestZKTLSTerm: on zks://, against a server that requires client
// certificates, with --ca-file, --cert-file and --key-file: a candidate
// leads, renews through several intervals while another waits, and
// resigns; the other then leads with a greater token.
func TestZKTLSTerm(t *testing.T) {
	ca := testenv.NewCA(t, "zk-ca")
	srv := testenv.StartZKWith(t, testenv.ZKOptions{CA: ca, ClientCertAuth: true})
	kp := ca.Client(t, "electd")
	s, err := openStore(t, store.Options{URL: srv.URL(), CAFile: ca.CertFile, CertFile: kp.CertFile, KeyFile: kp.KeyFile}, electortest.Logger())
	if err != nil {
		t.Fatalf("open %s: %v", srv.URL(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ttl := 2 * time.Second
	timing := elector.Timing{TTL: ttl}
	in := &renewals{}
	a := candidateOn(t, s, elector.Candidate{Election: "tls", ID: "a", Timing: timing, Instrument: in})
	b := candidateOn(t, s, elector.Candidate{Election: "tls", ID: "b", Timing: timing})
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign over TLS: %v", err)
	}
	bWon := electortest.Campaign(ctx, b)

	first, started := term.ValidUntil(), time.Now()
	electortest.Eventually(t, 30*time.Second, "6 renewals over 2 TTLs", func() bool {
		return in.n.Load() >= 6 && time.Since(started) > 2*ttl
	})
	select {
	case <-term.Done():
		t.Fatalf("the term ended after %d renewals: %v (store errors %q)", in.n.Load(), term.Err(), in.errors())
	default:
	}
	if !term.ValidUntil().After(first) {
		t.Fatalf("ValidUntil %s did not move from %s over %d renewals", term.ValidUntil(), first, in.n.Load())
	}
	l, err := b.Leader(ctx)
	if err != nil || l.ID != "a" || l.Token != term.Token {
		t.Fatalf("b sees leader %+v, %v; want a with token %d", l, err, term.Token)
	}
	electortest.StillWaiting(t, bWon, "b")

	electortest.Resign(t, term)
	r := electortest.MustLead(t, bWon, 20*time.Second, "b")
	if r.Term.Token <= term.Token {
		t.Fatalf("b's token %d is not greater than a's %d", r.Term.Token, term.Token)
	}
	electortest.Resign(t, r.Term)
}

// TestZKTLSRefused: electd's TLS settings that cannot work are refused
// at start, as a configuration error naming the flag to fix.
func TestZKTLSRefused(t *testing.T) {
	ca := testenv.NewCA(t, "zk-ca")
	other := testenv.NewCA(t, "other-ca")
	srv := testenv.StartZKWith(t, testenv.ZKOptions{CA: ca, ClientCertAuth: true})
	kp := ca.Client(t, "electd")
	tests := []struct {
		name  string
		opts  store.Options
		field string
		says  string
	}{
		{"wrong CA", store.Options{URL: srv.URL(), CAFile: other.CertFile, CertFile: kp.CertFile, KeyFile: kp.KeyFile},
			"ca-file", "the store's certificate is not trusted"},
		{"system CAs only", store.Options{URL: srv.URL(), CertFile: kp.CertFile, KeyFile: kp.KeyFile},
			"ca-file", "the store's certificate is not trusted"},
		{"no client certificate", store.Options{URL: srv.URL(), CAFile: ca.CertFile},
			"cert-file", "refused electd's client certificate, or wants one"},
	}
	// A plain URL is recognised on a TLS port, whether its handshake
	// completes without a client certificate (open) or ends in the
	// server's alert, ZooKeeper's TLS 1.2 asking for one (srv).
	open := testenv.StartZKWith(t, testenv.ZKOptions{CA: ca})
	plain := testenv.StartZK(t)
	tests = append(tests, []struct {
		name  string
		opts  store.Options
		field string
		says  string
	}{
		{"plain URL on the TLS port", store.Options{URL: strings.Replace(open.URL(), "zks://", "zk://", 1)},
			"store", "answers with TLS; use zks://"},
		{"plain URL on a TLS port that wants a client certificate", store.Options{URL: strings.Replace(srv.URL(), "zks://", "zk://", 1)},
			"store", "answers with TLS; use zks://"},
		{"TLS URL on a plain port", store.Options{URL: "zks://" + plain.Addr(), CAFile: ca.CertFile},
			"store", "answers without TLS; use zk://"},
	}...)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := openStore(t, tc.opts, electortest.Logger())
			var ce *elector.ConfigError
			if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.says) {
				t.Fatalf("open: %v; want a ConfigError naming %s that says %q", err, tc.field, tc.says)
			}
			t.Logf("refused: %v", err)
		})
	}
}

// tlsClient is a go-zookeeper client on the TLS port with cfg, closed when
// the test ends.
func tlsClient(t *testing.T, cfg *tls.Config, addr string) *gozk.Conn {
	t.Helper()
	dial := func(network, addr string, timeout time.Duration) (net.Conn, error) {
		return tls.DialWithDialer(&net.Dialer{Timeout: timeout}, network, addr, cfg)
	}
	c, _, err := gozk.Connect([]string{addr}, 4*time.Second, gozk.WithDialer(dial), gozk.WithLogInfo(false), gozk.WithLogger(quiet{}))
	if err != nil {
		t.Fatalf("connect to %s: %v", addr, err)
	}
	t.Cleanup(c.Close)
	return c
}

// tlsSecret has characters a URL must escape, so that its raw and escaped
// forms are both looked for.
const tlsSecret = "Zq9-pa/ss@w?rd#x"

// TestZKTLSDigestAuthRedacted: digest authentication over TLS, with the
// password in the zks:// URL: electd leads, its nodes are closed to a
// client without the credentials, a wrong password is refused for good,
// and the password (raw or escaped) is in none of the debug logs, the
// errors, the store errors reported, Leader, Status (Queue) or the
// redacted URL.
func TestZKTLSDigestAuthRedacted(t *testing.T) {
	ca := testenv.NewCA(t, "zk-ca")
	srv := testenv.StartZKWith(t, testenv.ZKOptions{CA: ca, ClientCertAuth: true})
	kp := ca.Client(t, "electd")
	withPassword := func(pw string) store.Options {
		u := strings.Replace(srv.URL(), "zks://", "zks://alice:"+url.QueryEscape(pw)+"@", 1) + "/apps/tls"
		return store.Options{URL: u, CAFile: ca.CertFile, CertFile: kp.CertFile, KeyFile: kp.KeyFile}
	}
	// withOtherCert is o with a client certificate of another subject
	// (ZooKeeper authenticates a TLS client as its certificate's subject
	// too, scheme x509).
	otherKP := ca.Client(t, "someone-else")
	withOtherCert := func(o store.Options) store.Options {
		o.CertFile, o.KeyFile = otherKP.CertFile, otherKP.KeyFile
		return o
	}
	var seen strings.Builder // everything electd said or answered
	collect := func(what string, v any) { fmt.Fprintf(&seen, "==== %s\n%+v\n", what, v) }
	logs, log := debugLog()

	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	s, err := openStore(t, withPassword(tlsSecret), log)
	if err != nil {
		t.Fatalf("open with digest credentials: %v", err)
	}
	collect("redacted URL", s.Redacted())
	in := &renewals{}
	a := candidateOn(t, s, elector.Candidate{Election: "auth", ID: "a", Address: "http://a:8080",
		Timing: elector.Timing{TTL: 2 * time.Second}, Logger: log, Instrument: in})
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign with digest credentials over TLS: %v", err)
	}
	collect("term", term.Leader)
	electortest.Eventually(t, 20*time.Second, "2 renewals", func() bool { return in.n.Load() >= 2 })
	l, err := a.Leader(ctx)
	if err != nil || l.ID != "a" || l.Token != term.Token {
		t.Fatalf("Leader = %+v, %v", l, err)
	}
	collect("leader", l)
	q, err := a.(elector.Queuer).Queue(ctx)
	if err != nil || len(q.Candidates) != 1 || q.Candidates[0].ID != "a" {
		t.Fatalf("Queue = %+v, %v; want a alone", q, err)
	}
	collect("queue", q)
	b, err := json.Marshal(q)
	if err != nil {
		t.Fatal(err)
	}
	collect("queue as JSON", string(b))

	anon := tlsClient(t, srv.ClientTLS(), srv.Addr())
	if _, _, err := anon.Children("/apps/tls/electd/elections/auth"); !errors.Is(err, gozk.ErrNoAuth) {
		t.Fatalf("a TLS client without the credentials listed the election: %v, want ErrNoAuth", err)
	}
	// The same certificate without the password is refused too: the ACL
	// names the digest user alone, not the creator's x509 identity.
	sameCert := ca.ClientTLS(t, &kp)
	sameCert.ServerName = "127.0.0.1"
	if _, _, err := tlsClient(t, sameCert, srv.Addr()).Children("/apps/tls/electd/elections/auth"); !errors.Is(err, gozk.ErrNoAuth) {
		t.Fatalf("a client with electd's certificate but no password listed the election: %v, want ErrNoAuth "+
			"(the ACL must name the digest user alone)", err)
	}

	// A wrong password (with another certificate): refused for good when
	// the candidate campaigns.
	wrong, err := openStore(t, withOtherCert(withPassword("x"+tlsSecret)), log)
	if err != nil {
		t.Fatalf("open with a wrong password: %v", err)
	}
	bad := candidateOn(t, wrong, elector.Candidate{Election: "auth", ID: "b", Timing: elector.Timing{TTL: 2 * time.Second}, Logger: log})
	_, err = bad.Campaign(ctx)
	var se *elector.StoreError
	if !errors.As(err, &se) || !se.Permanent || zk.Backend.Refused(err) != backend.RefusedPermission {
		t.Fatalf("campaign with a wrong password: %v; want a permanent permission refusal; logs:\n%s", err, logs.String())
	}
	collect("wrong password's campaign", err)
	// A wrong CA, with the password in the URL.
	other := testenv.NewCA(t, "other-ca")
	o := withPassword(tlsSecret)
	o.CAFile = other.CertFile
	_, err = openStore(t, o, log)
	var ce *elector.ConfigError
	if !errors.As(err, &ce) || ce.Field != "ca-file" {
		t.Fatalf("open with a wrong CA: %v; want a ConfigError naming ca-file", err)
	}
	collect("wrong CA", err)
	electortest.Resign(t, term)

	collect("store errors reported", in.errors())
	collect("logs", logs.String())
	if !strings.Contains(logs.String(), "alice:REDACTED@") {
		t.Errorf("the logs do not show the redacted URL; did they reach the buffer?\n%s", logs.String())
	}
	escaped := strings.TrimPrefix(url.UserPassword("u", tlsSecret).String(), "u:")
	for _, pw := range []string{tlsSecret, escaped, url.QueryEscape(tlsSecret)} {
		if i := strings.Index(seen.String(), pw); i >= 0 {
			t.Errorf("the password (as %q) appears in what electd said:\n%s", pw, seen.String()[max(0, i-300):min(seen.Len(), i+100)])
		}
	}
	if t.Failed() || testing.Verbose() {
		t.Logf("collected:\n%s", seen.String())
	}
}

// TestZKEnsembleTLS: on zks:// naming every member of an ensemble whose
// client ports speak only TLS (no client certificate asked for, the CA
// from --ca-file alone): a candidate leads and renews through several
// intervals (each renewal's Sync goes through the ensemble's leader), and
// resigns.
func TestZKEnsembleTLS(t *testing.T) {
	ca := testenv.NewCA(t, "zk-ca")
	e := testenv.StartZKEnsembleWith(t, testenv.ZKOptions{CA: ca})
	s, err := openStore(t, store.Options{URL: e.URL(), CAFile: ca.CertFile}, electortest.Logger())
	if err != nil {
		t.Fatalf("open %s: %v", e.URL(), err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	in := &renewals{}
	a := candidateOn(t, s, elector.Candidate{Election: "tls", ID: "a", Timing: elector.Timing{TTL: 2 * time.Second}, Instrument: in})
	term, err := a.Campaign(ctx)
	if err != nil {
		t.Fatalf("campaign over TLS: %v", err)
	}
	started := time.Now()
	electortest.Eventually(t, 30*time.Second, "6 renewals over 2 TTLs", func() bool {
		return in.n.Load() >= 6 && time.Since(started) > 4*time.Second
	})
	select {
	case <-term.Done():
		t.Fatalf("the term ended after %d renewals: %v (store errors %q)", in.n.Load(), term.Err(), in.errors())
	default:
	}
	electortest.Resign(t, term)
}
