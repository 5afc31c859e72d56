// kubeadm as released in k8s.io/kubernetes (cmd/kubeadm), built from the same pinned
// module versions as the lab's control plane (lab/go/kubernetes/go.mod). The lab uses it
// only to render static pod manifests from a ClusterConfiguration (tests/lab).
package main

import (
	"os"

	"k8s.io/kubernetes/cmd/kubeadm/app"
)

func main() {
	if err := app.Run(); err != nil {
		os.Exit(1)
	}
}
