// Command kube-apiserver is Kubernetes' API server, v1.37.2, for electd's
// tests of its Kubernetes Lease backend: the same main as
// k8s.io/kubernetes/cmd/kube-apiserver, built in this module (go.mod says
// why). `make kube-apiserver` in electd's root builds it into bin/, and
// internal/testenv's StartKube runs it, backed by an etcd of its own.
package main

import (
	"os"
	_ "time/tzdata" // as upstream: time zones for CronJob

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // --logging-format=json
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go's metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kube-apiserver/app"
)

func main() {
	os.Exit(cli.Run(app.NewAPIServerCommand()))
}
