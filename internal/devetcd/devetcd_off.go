//go:build noembed

package devetcd

import "errors"

// ErrNoEmbed is what Start reports in a build without the embedded etcd.
var ErrNoEmbed = errors.New("this electd was built with -tags noembed, without the embedded etcd that demo and dev need; build without the tag (go run ./cmd/electd demo) or point --store at a real etcd or Redis")

// Etcd is absent from this build.
type Etcd struct{}

// Start fails: this build has no embedded etcd.
func Start(dir, clientAddr, logLevel string) (*Etcd, error) {
	return nil, ErrNoEmbed
}

// Endpoint is never called: Start always fails.
func (*Etcd) Endpoint() string { return "" }

// Close is never called: Start always fails.
func (*Etcd) Close() {}
