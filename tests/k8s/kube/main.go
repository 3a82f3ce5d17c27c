// Command kube is one multi-call binary (k3s/hyperkube style) holding every component of the
// test cluster, plus cri-reset (cri.go) and kubeadm (for the kind node image). One link instead
// of eight saves minutes on 2 cores and ~400 MB of disk.
//
//	kube <component> [flags...]     or a symlink named <component> pointing at kube
//
// Each component's main body below mirrors k8s.io/kubernetes/cmd/<component>/*.go.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	_ "time/tzdata" // CronJob time zones, as in cmd/kube-apiserver

	"github.com/spf13/pflag"
	"go.etcd.io/etcd/server/v3/etcdmain"
	"k8s.io/component-base/cli"
	"k8s.io/component-base/logs"
	_ "k8s.io/component-base/logs/json/register"
	_ "k8s.io/component-base/metrics/prometheus/clientgo"
	_ "k8s.io/component-base/metrics/prometheus/version"
	kubectlcmd "k8s.io/kubectl/pkg/cmd"
	kubectlutil "k8s.io/kubectl/pkg/cmd/util"
	apiserver "k8s.io/kubernetes/cmd/kube-apiserver/app"
	controllermanager "k8s.io/kubernetes/cmd/kube-controller-manager/app"
	proxy "k8s.io/kubernetes/cmd/kube-proxy/app"
	scheduler "k8s.io/kubernetes/cmd/kube-scheduler/app"
	kubeadm "k8s.io/kubernetes/cmd/kubeadm/app"
	kubeadmerrors "k8s.io/kubernetes/cmd/kubeadm/app/util/errors"
	kubelet "k8s.io/kubernetes/cmd/kubelet/app"
)

var components = map[string]func() int{
	"etcd": func() int {
		etcdmain.Main(os.Args)
		return 0
	},
	"kube-apiserver": func() int { return cli.Run(apiserver.NewAPIServerCommand()) },
	"kube-controller-manager": func() int {
		return cli.Run(controllermanager.NewControllerManagerCommand())
	},
	"kube-scheduler": func() int { return cli.Run(scheduler.NewSchedulerCommand()) },
	"kubelet":        func() int { return cli.Run(kubelet.NewKubeletCommand(context.Background())) },
	"kube-proxy":     func() int { return cli.Run(proxy.NewProxyCommand()) },
	"cri-reset":      criReset,
	"kubeadm": func() int {
		// Only kubeadm's own flags, as in its own binary: kubeadm.Run offers every Go flag, and
		// the other components' packages (cadvisor's among them) register theirs at init.
		flag.CommandLine = flag.NewFlagSet(os.Args[0], flag.ExitOnError)
		pflag.CommandLine = pflag.NewFlagSet(os.Args[0], pflag.ExitOnError)
		kubeadmerrors.HandleError(kubeadm.Run()) // prints the error and exits with its code
		return 0
	},
	"kubectl": func() int {
		logs.GlogSetter(kubectlcmd.GetLogVerbosity(os.Args)) //nolint:errcheck
		if err := cli.RunNoErrOutput(kubectlcmd.NewDefaultKubectlCommand()); err != nil {
			kubectlutil.CheckErr(err)
		}
		return 0
	},
}

func main() {
	name := filepath.Base(os.Args[0])
	if _, ok := components[name]; !ok && len(os.Args) > 1 {
		// "kube <component> args...": the components parse os.Args[1:] themselves.
		name = os.Args[1]
		os.Args = os.Args[1:]
	}
	run, ok := components[name]
	if !ok {
		names := make([]string, 0, len(components))
		for n := range components {
			names = append(names, n)
		}
		sort.Strings(names)
		fmt.Fprintf(os.Stderr, "usage: kube <component> [args...]\ncomponents: %v\n", names)
		os.Exit(2)
	}
	os.Exit(run())
}
