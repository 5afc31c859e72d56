// pause holds a pod's namespaces open for the lab's real-node cluster. The kubelet starts one
// per pod as the sandbox container (containerd's CRI plugin: the "sandbox" image); it must do
// nothing, stay up until it is told to stop, and, as PID 1 of the pod when the pod shares its
// process namespace, reap orphaned children so they do not stay zombies.
// Written for the lab; the upstream program (k8s.io/kubernetes build/pause) is C.
package main

import (
	"fmt"
	"os"
	"os/signal"
	"syscall"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "-v" {
		fmt.Println("loadwise-lab pause")
		return
	}
	sigs := make(chan os.Signal, 8)
	signal.Notify(sigs, syscall.SIGINT, syscall.SIGTERM, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			// containerd stops a sandbox with SIGTERM (then SIGKILL): leave at once, cleanly.
			os.Exit(0)
		}
		reap()
	}
}

// reap collects every child that has exited; SIGCHLD signals coalesce, so one signal can
// stand for several children.
func reap() {
	for {
		var status syscall.WaitStatus
		pid, err := syscall.Wait4(-1, &status, syscall.WNOHANG, nil)
		if pid <= 0 || err != nil {
			return
		}
	}
}
