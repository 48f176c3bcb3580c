package faultproxy

import "testing"

// Start is New for a test: it fails t if the proxy cannot listen, and
// closes the proxy (and every connection through it) when t ends.
func Start(t testing.TB, target string) *Proxy {
	t.Helper()
	p, err := New(target)
	if err != nil {
		t.Fatalf("start a fault proxy to %s: %v", target, err)
	}
	t.Cleanup(func() {
		if err := p.Close(); err != nil {
			t.Errorf("close the fault proxy to %s: %v", target, err)
		}
	})
	return p
}
