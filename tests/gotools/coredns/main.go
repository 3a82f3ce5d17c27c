// Command coredns is CoreDNS with only the plugins of the Corefile kubeadm writes (its CoreDNS
// addon: errors health ready kubernetes prometheus forward cache loop reload loadbalance), plus
// log and whoami for debugging. Upstream's command (coredns.go) imports core/plugin, which pulls in
// every plugin and the AWS, Azure and Google Cloud SDKs: minutes of compile on 2 cores for plugins
// the kind cluster never loads.
package main

import (
	"strings"

	"github.com/coredns/caddy"
	"github.com/coredns/coredns/core/dnsserver"
	"github.com/coredns/coredns/coremain"

	_ "github.com/coredns/coredns/plugin/cache"
	_ "github.com/coredns/coredns/plugin/errors"
	_ "github.com/coredns/coredns/plugin/forward"
	_ "github.com/coredns/coredns/plugin/health"
	_ "github.com/coredns/coredns/plugin/kubernetes"
	_ "github.com/coredns/coredns/plugin/loadbalance"
	_ "github.com/coredns/coredns/plugin/log"
	_ "github.com/coredns/coredns/plugin/loop"
	_ "github.com/coredns/coredns/plugin/metrics" // the "prometheus" directive
	_ "github.com/coredns/coredns/plugin/ready"
	_ "github.com/coredns/coredns/plugin/reload"
	_ "github.com/coredns/coredns/plugin/whoami"
)

// init runs after the plugins' own (they register themselves): upstream's directive list, in its
// order, is cut down to the plugins registered here, so that a Corefile naming any other plugin
// fails at its parse with "unknown directive" rather than with no plugin to set it up.
func init() {
	registered := map[string]bool{}
	for _, p := range caddy.ListPlugins()["others"] {
		if name, ok := strings.CutPrefix(p, "dns."); ok {
			registered[name] = true
		}
	}
	var directives []string
	for _, d := range dnsserver.Directives {
		if registered[d] {
			directives = append(directives, d)
		}
	}
	dnsserver.Directives = directives
}

func main() {
	coremain.Run()
}
