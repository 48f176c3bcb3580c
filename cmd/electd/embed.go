//go:build !noembed

package main

import (
	"fmt"
	"net/url"
	"time"

	"go.etcd.io/etcd/server/v3/embed"
)

// embeddedEtcd is a single-member etcd inside this process, for `demo`
// and `dev`. It is not for production: one member, no TLS. Production
// builds leave it out with -tags noembed (see embed_off.go): linking the
// etcd server costs every electd process memory at start even when unused.
type embeddedEtcd struct {
	e *embed.Etcd
}

// startEmbeddedEtcd starts etcd with its data in dir, serving clients on
// clientAddr (host:port; port 0 picks a free one), logging at logLevel.
func startEmbeddedEtcd(dir, clientAddr, logLevel string) (*embeddedEtcd, error) {
	cfg := embed.NewConfig()
	cfg.Name = "electd-embedded"
	cfg.Dir = dir
	cfg.LogLevel = logLevel
	cfg.LogOutputs = []string{"stderr"}
	cfg.TickMs, cfg.ElectionMs = 10, 100
	cu, err := url.Parse("http://" + clientAddr)
	if err != nil {
		return nil, fmt.Errorf("client address %q: %w", clientAddr, err)
	}
	pu, _ := url.Parse("http://127.0.0.1:0")
	cfg.ListenClientUrls, cfg.AdvertiseClientUrls = []url.URL{*cu}, []url.URL{*cu}
	cfg.ListenPeerUrls, cfg.AdvertisePeerUrls = []url.URL{*pu}, []url.URL{*pu}
	cfg.InitialCluster = cfg.InitialClusterFromName(cfg.Name)
	e, err := embed.StartEtcd(cfg)
	if err != nil {
		return nil, fmt.Errorf("start embedded etcd: %w", err)
	}
	select {
	case <-e.Server.ReadyNotify():
	case err := <-e.Err():
		e.Close()
		return nil, fmt.Errorf("embedded etcd failed: %w", err)
	case <-time.After(30 * time.Second):
		e.Close()
		return nil, fmt.Errorf("embedded etcd not ready after 30s")
	}
	return &embeddedEtcd{e: e}, nil
}

// Endpoint is the client host:port.
func (m *embeddedEtcd) Endpoint() string { return m.e.Clients[0].Addr().String() }

// Close stops etcd; close its clients first (it waits for them otherwise).
func (m *embeddedEtcd) Close() { m.e.Close() }
