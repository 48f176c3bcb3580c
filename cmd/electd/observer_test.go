package main

import (
	"testing"

	"github.com/electd/electd/internal/testenv"
)

// killableStore is a store that a test of the observers (`electd leader`,
// `electd status`) starts, and takes away with kill.
type killableStore struct {
	name  string
	start func(t *testing.T) (url string, kill func())
}

// killableStores are a single etcd and a single Redis server.
func killableStores() []killableStore {
	return []killableStore{
		{name: "etcd", start: func(t *testing.T) (string, func()) {
			e := testenv.StartEtcd(t)
			return "etcd://" + e.Endpoint(), func() { e.Kill(t) }
		}},
		{name: "redis", start: func(t *testing.T) (string, func()) {
			r := testenv.StartRedis(t)
			return "redis://" + r.Addr(), func() { r.Kill(t) }
		}},
	}
}
