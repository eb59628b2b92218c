// Command clusterrole-aggregation runs kube-controller-manager's ClusterRole aggregation
// controller alone, against the test control plane (which runs no controller-manager).
//
// Without it the built-in admin, edit and view ClusterRoles keep `rules: null`: the API
// server only creates them with their aggregationRule
// (plugin/pkg/auth/authorizer/rbac/bootstrappolicy/policy.go, ClusterRoles), and it is this
// controller (pkg/controller/clusterroleaggregation) that copies in the rules of every
// ClusterRole labelled rbac.authorization.k8s.io/aggregate-to-<role>: "true". It is wired
// exactly as cmd/kube-controller-manager/app/rbac.go does (a ClusterRole informer, the
// clusterrole-aggregation-controller client, 5 workers).
//
// Usage: clusterrole-aggregation --kubeconfig FILE [--as USER [--as-group GROUP]...]
// It runs until SIGINT/SIGTERM. --as impersonates the identity kube-controller-manager gives
// the controller (a client certificate cannot carry it: the name is longer than a CN's 64
// characters). Built by tests/integration/aggregation.py from this module's pinned versions
// (hack/testcp/kube/go.mod, -mod=readonly).
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"

	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/kubernetes/pkg/controller/clusterroleaggregation"
)

func main() {
	kubeconfig := flag.String("kubeconfig", "", "kubeconfig of a user allowed to list, watch and apply ClusterRoles")
	as := flag.String("as", "", "user to impersonate")
	var groups []string
	flag.Func("as-group", "group to impersonate (repeatable)", func(g string) error {
		groups = append(groups, g)
		return nil
	})
	flag.Parse()
	if *kubeconfig == "" {
		fmt.Fprintln(os.Stderr, "clusterrole-aggregation: --kubeconfig is required")
		os.Exit(2)
	}
	config, err := clientcmd.BuildConfigFromFlags("", *kubeconfig)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clusterrole-aggregation: %v\n", err)
		os.Exit(1)
	}
	config.UserAgent = "clusterrole-aggregation-controller"
	if *as != "" {
		config.Impersonate = rest.ImpersonationConfig{UserName: *as, Groups: groups}
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fmt.Fprintf(os.Stderr, "clusterrole-aggregation: %v\n", err)
		os.Exit(1)
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	factory := informers.NewSharedInformerFactory(client, 12*time.Hour)
	controller := clusterroleaggregation.NewClusterRoleAggregation(
		factory.Rbac().V1().ClusterRoles(), client.RbacV1())
	factory.Start(ctx.Done())
	fmt.Println("clusterrole-aggregation: running")
	controller.Run(ctx, 5)
	factory.Shutdown()
}
