//go:build noembed

package main

import "errors"

// errNoEmbed is what `demo` and `dev` report in a build without the
// embedded etcd.
var errNoEmbed = errors.New("this electd was built with -tags noembed, without the embedded etcd that demo and dev need; build without the tag (go run ./cmd/electd demo) or point --store at a real etcd or Redis")

// embeddedEtcd is absent from this build.
type embeddedEtcd struct{}

func startEmbeddedEtcd(dir, clientAddr, logLevel string) (*embeddedEtcd, error) {
	return nil, errNoEmbed
}

// Endpoint is never called: startEmbeddedEtcd always fails.
func (*embeddedEtcd) Endpoint() string { return "" }

// Close is never called: startEmbeddedEtcd always fails.
func (*embeddedEtcd) Close() {}
