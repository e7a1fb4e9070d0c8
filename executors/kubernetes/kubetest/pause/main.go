// Command pause is the sandbox ("pause") image of the test cluster
// (package kubetest): nothing can be pulled here, so the pod sandbox is
// this static program, which holds the pod's namespaces until it is told
// to stop.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	c := make(chan os.Signal, 1)
	signal.Notify(c, syscall.SIGTERM, syscall.SIGINT)
	<-c
}
