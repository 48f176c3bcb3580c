package rediskit

import (
	"testing"

	"github.com/redis/go-redis/v9"
)

func TestChannel(t *testing.T) {
	tests := []struct {
		name string
		db   int
		want string
	}{
		{name: "database 0 keeps its name", db: 0, want: "electd:{job}:events"},
		{name: "database 1", db: 1, want: "electd:{job}:db1:events"},
		{name: "database 15", db: 15, want: "electd:{job}:db15:events"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := Channel("electd:{job}:", tt.db); got != tt.want {
				t.Errorf("Channel(db %d) = %q, want %q", tt.db, got, tt.want)
			}
		})
	}
}

func TestDB(t *testing.T) {
	tests := []struct {
		name string
		cli  redis.UniversalClient
		want int
	}{
		{name: "client", cli: redis.NewClient(&redis.Options{DB: 3}), want: 3},
		{name: "failover client", cli: redis.NewFailoverClient(&redis.FailoverOptions{MasterName: "m", DB: 2}), want: 2},
		{name: "cluster", cli: redis.NewClusterClient(&redis.ClusterOptions{}), want: 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() { _ = tt.cli.Close() }()
			if got := DB(tt.cli); got != tt.want {
				t.Errorf("DB = %d, want %d", got, tt.want)
			}
		})
	}
}
