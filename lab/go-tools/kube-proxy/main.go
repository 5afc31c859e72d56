// kube-proxy as released in k8s.io/kubernetes (cmd/kube-proxy), built from the same pinned
// module versions as the lab's control plane, for the real-node cluster (lab/realnodes.py):
// kubeadm's proxy addon runs it as a DaemonSet, so pods reach Services (the API server's
// `kubernetes` Service first of all) by their cluster IPs.
package main

import (
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kube-proxy/app"
)

func main() {
	os.Exit(cli.Run(app.NewProxyCommand()))
}
