package cli

import (
	"fmt"
	"io"
	"slices"
	"strings"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// printService says what `berth apply` of a service did and where the
// gateway answers it. The server keeps its replicas from here on: apply
// returns.
func printService(out io.Writer, c *client.Client, t *spec.Task, run *api.Run) {
	url := ServiceURL(c.BaseURL(), run.Project, t.Name)
	r := t.ReplicaRange()
	fmt.Fprintf(out, "Service %s applied (replicas %s", t.Name, r)
	if run.ID != 0 {
		fmt.Fprintf(out, "; newest replica: run %d", run.ID)
	}
	fmt.Fprintf(out, ")\nIt answers at %s\n", url)
	for _, u := range run.URLs { // on the gateway's domain
		fmt.Fprintf(out, "         and %s\n", u)
	}
	if len(run.URLs) > 0 {
		url = run.URLs[0]
	}
	if t.AuthRequired() {
		fmt.Fprintf(out, "  curl -H \"Authorization: Bearer $BERTH_TOKEN\" %s\n", url)
	} else {
		fmt.Fprintf(out, "  curl %s\n", url)
	}
	fmt.Fprintf(out, "Stop it with: berth stop %s\n", t.Name)
}

// ServiceURL is a service's gateway URL on the server at base.
func ServiceURL(base, project, name string) string {
	return strings.TrimSuffix(base, "/") + "/proxy/services/" + project + "/" + name + "/"
}

// serviceUpdate says what applying t over the active service does.
func serviceUpdate(w io.Writer, active *api.Run, t *spec.Task) {
	diff := ""
	if active.Spec != nil {
		old := *active.Spec
		// PORT is the server's, per replica.
		old.Env = slices.DeleteFunc(slices.Clone(old.Env), func(v spec.EnvVar) bool { return v.Name == "PORT" })
		diff = specDiff(&old, t)
	}
	if diff == "" {
		fmt.Fprintf(w, " Service %s is active (replica run %d). Detected no changes.\n\n", t.Name, active.ID)
		return
	}
	fmt.Fprintf(w, " Service %s is active (replica run %d). Detected changes:\n%s\n A rolling update replaces its replicas one at a time, each new one ready before an old one is drained and stopped (a change of replicas, scaling, probes or auth alone applies without new replicas).\n\n", t.Name, active.ID, diff)
}
