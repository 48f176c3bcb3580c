package rediskit

import (
	"strconv"

	"github.com/redis/go-redis/v9"
)

// Channel is the pub/sub channel of the election whose keys begin with
// prefix ("electd:{NAME}:"), in database db. Keys live in a database, but
// channels are server-wide: the same election name in two databases of one
// server needs two channels, or each side's watchers take the other's
// messages for their own. Database 0 keeps the name "<prefix>events" (a
// Redis Cluster has no other database), so that copies of electd from
// before the database was in the name still hear each other there; any
// other database n is "<prefix>db<n>:events". The hash tag in prefix keeps
// the channel in the election's Cluster slot.
func Channel(prefix string, db int) string {
	if db == 0 {
		return prefix + "events"
	}
	return prefix + "db" + strconv.Itoa(db) + ":events"
}

// DB is the database c's commands go to (a cluster's is 0).
func DB(c redis.UniversalClient) int {
	switch c := c.(type) {
	case *redis.Client:
		return c.Options().DB
	case *redis.Ring:
		return c.Options().DB
	}
	return 0
}
