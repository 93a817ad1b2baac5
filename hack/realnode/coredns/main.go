// CoreDNS with only the plugins the local cluster's real node needs (the upstream binary links every
// plugin, including cloud SDKs: slower to build, nothing we use). Built by hack/build-binaries.sh node.
package main

import (
	"github.com/coredns/coredns/coremain"

	// Registered by import; the Corefile written by hack/localcluster.py uses exactly these.
	_ "github.com/coredns/coredns/plugin/bind"
	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/ready"
)

func main() { coremain.Run() }
