package redistest

import (
	"context"
	"testing"

	"github.com/redis/go-redis/v9"

	"github.com/electd/electd/internal/testenv"
)

// CommandStats returns cli's server's INFO commandstats as command →
// calls (those run inside scripts included), and fails the test if the
// server does not answer.
func CommandStats(t testing.TB, cli redis.UniversalClient) map[string]int {
	t.Helper()
	stats, err := testenv.RedisCommandStats(context.Background(), cli)
	if err != nil {
		t.Fatal(err)
	}
	return stats
}
