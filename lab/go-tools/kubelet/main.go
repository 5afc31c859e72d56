// kubelet as released in k8s.io/kubernetes (cmd/kubelet), built from the same pinned module
// versions as the lab's control plane (lab/go/kubernetes/go.mod), so the lab's real-node
// cluster (lab/realnodes.py) runs the node agent of the release it tests against.
package main

import (
	"context"
	"os"

	"k8s.io/component-base/cli"
	_ "k8s.io/component-base/logs/json/register"          // JSON log format, as upstream registers it
	_ "k8s.io/component-base/metrics/prometheus/clientgo" // client-go metrics on /metrics
	_ "k8s.io/component-base/metrics/prometheus/version"  // the version metric
	"k8s.io/kubernetes/cmd/kubelet/app"
)

func main() {
	os.Exit(cli.Run(app.NewKubeletCommand(context.Background())))
}
