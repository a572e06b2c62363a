// Command pause is the test cluster's sandbox ("pause") container: it holds
// a Pod's namespaces, reaps the orphans the Pod's processes leave, and
// exits on SIGTERM or SIGINT. scripts/kube/cluster.sh builds it into an
// image, as Kubernetes' own pause image is built from a few lines of C.
package main

import (
	"os"
	"os/signal"
	"syscall"
)

func main() {
	sigs := make(chan os.Signal, 4)
	signal.Notify(sigs, syscall.SIGTERM, syscall.SIGINT, syscall.SIGCHLD)
	for s := range sigs {
		if s != syscall.SIGCHLD {
			os.Exit(0)
		}
		for {
			pid, err := syscall.Wait4(-1, nil, syscall.WNOHANG, nil)
			if pid <= 0 || err != nil {
				break
			}
		}
	}
}
