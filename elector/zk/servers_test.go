package zk

import (
	"fmt"
	"testing"
)

// TestServersPause: the client pauses (retryStart) only once every server
// has been tried since the last connection, so the first try after a loss
// goes out at once, on one server too.
func TestServersPause(t *testing.T) {
	tests := []struct {
		name    string
		servers int
	}{
		{name: "one server", servers: 1},
		{name: "three servers", servers: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var addrs []string
			for i := range tc.servers {
				addrs = append(addrs, fmt.Sprintf("127.0.0.%d:2181", i+1))
			}
			h := &servers{}
			if err := h.Init(addrs); err != nil {
				t.Fatal(err)
			}
			for round := range 2 { // the first connection, then after a loss
				seen := map[string]bool{}
				for i := range tc.servers {
					s, pause := h.Next()
					if pause {
						t.Fatalf("round %d: paused before try %d of %d servers", round, i+1, tc.servers)
					}
					seen[s] = true
				}
				if len(seen) != tc.servers {
					t.Errorf("round %d: tried %d distinct servers of %d", round, len(seen), tc.servers)
				}
				if _, pause := h.Next(); !pause {
					t.Errorf("round %d: no pause after every server was tried", round)
				}
				h.Connected()
			}
		})
	}
}
