// The pod sandbox's process for the e2e node (containerd's sandbox_image): holds the pod's namespaces and exits on
// SIGTERM or SIGINT. No registry is reachable here to pull registry.k8s.io/pause.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	stop := make(chan os.Signal, 1)
	signal.Notify(stop, syscall.SIGTERM, syscall.SIGINT)
	<-stop
}
