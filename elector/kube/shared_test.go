package kube_test

import (
	"sync"
	"testing"
	"time"

	"github.com/electd/electd/elector/electortest"
	"github.com/electd/electd/elector/kube"
	"github.com/electd/electd/internal/testenv"
)

// goLeads bounds how long a client-go elector (2 s lease, 200 ms retry
// period) takes to lead a Lease it may have to wait out.
const goLeads = 10 * time.Second

// sharedLeases gives the suites each election's Lease as a client-go
// elector left it, and hands it back to client-go after them:
//
//   - before the first candidate of an election, a client-go LeaderElector
//     creates the Lease, leads and releases it (ReleaseOnCancel), so
//     electd's candidates start from client-go's record: holder cleared,
//     client-go's acquireTime, leaseDurationSeconds 1, no electd annotation;
//   - when the test ends, after every electd candidate of it has closed, a
//     client-go elector must lead the Lease within goLeads: electd leaves
//     a record that client-go accepts, whatever the test did to it.
type sharedLeases struct {
	k *testenv.Kube

	mu   sync.Mutex
	seen map[string]bool
}

// share prepares election's Lease the first time a test names it. It
// runs before the test's first candidate is made, so its cleanup runs
// after every candidate's Close.
func (s *sharedLeases) share(t testing.TB, election string) {
	t.Helper()
	s.mu.Lock()
	first := !s.seen[election]
	if s.seen == nil {
		s.seen = map[string]bool{}
	}
	s.seen[election] = true
	s.mu.Unlock()
	if !first {
		return
	}
	lease := kube.LeaseName(election)
	g := runGo(t, s.k, lease, "client-go-before", true)
	electortest.Eventually(t, goLeads, "client-go leading "+lease+" before electd", g.leading)
	g.stop()
	t.Cleanup(func() {
		g := runGo(t, s.k, lease, "client-go-after", false)
		defer g.stop()
		electortest.Eventually(t, goLeads, "client-go leading "+lease+" after electd", g.leading)
	})
}

// TestConformanceOnClientGoLeases runs the conformance suite on Leases a
// client-go elector created and released, and checks that client-go leads
// each of them after the test.
func TestConformanceOnClientGoLeases(t *testing.T) {
	k := testenv.StartKube(t)
	electortest.Run(t, &harness{k: k, shared: &sharedLeases{k: k}})
}

// TestLockSuiteOnClientGoLeases is TestConformanceOnClientGoLeases for the
// lock suite.
func TestLockSuiteOnClientGoLeases(t *testing.T) {
	k := testenv.StartKube(t)
	electortest.RunLock(t, &harness{k: k, shared: &sharedLeases{k: k}})
}
