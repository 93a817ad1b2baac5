// CoreDNS for the kind node image: the plugins of the Corefile kubeadm deploys (its CoreDNS addon), nothing else.
// Built at the version that kubeadm names by hack/build-binaries.sh kind; packaged by hack/kind/images.py.
package main

import (
	"github.com/coredns/coredns/coremain"

	// Registered by import: errors, health, ready, kubernetes, prometheus, forward, cache, loop, reload,
	// loadbalance are what kubeadm's Corefile names; log for a user who turns query logging on.
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics"
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
)

func main() { coremain.Run() }
