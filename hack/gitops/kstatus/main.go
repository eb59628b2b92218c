// Command kstatus prints the kstatus of Kubernetes objects, computed by the library Flux and
// cli-utils use (sigs.k8s.io/cli-utils pkg/kstatus/status.Compute), so orca's tests ask the
// real client rather than a re-statement of its rules.
//
// Input on stdin: JSON or YAML, one object, a List (kubectl get -o json), or several YAML
// documents. Output on stdout: one JSON object per input object, in order:
//
//	{"namespace": "shop", "name": "web", "status": "Current", "message": "..."}
//
// Exit 0 when every object was computed; 1 with one line on stderr otherwise.
package main

import (
	"encoding/json"
	"fmt"
	"os"

	"sigs.k8s.io/cli-utils/pkg/kstatus/status"

	"orca.local/hack/gitops/internal/objects"
)

type result struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	Status    string `json:"status"`
	Message   string `json:"message"`
}

func main() {
	objs, err := objects.Read(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
		os.Exit(1)
	}
	encoder := json.NewEncoder(os.Stdout)
	for _, u := range objs {
		res, err := status.Compute(u)
		if err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %s/%s: %v\n", u.GetNamespace(), u.GetName(), err)
			os.Exit(1)
		}
		out := result{u.GetNamespace(), u.GetName(), string(res.Status), res.Message}
		if err := encoder.Encode(out); err != nil {
			fmt.Fprintf(os.Stderr, "kstatus: %v\n", err)
			os.Exit(1)
		}
	}
}
