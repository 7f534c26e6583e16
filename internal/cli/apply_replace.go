package cli

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"slices"
	"strings"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

// specDiff lists the fields whose values differ between the active run's
// configuration and the new one, one "  field: old -> new" line each, in
// alphabetical order; "" when they are the same. What the server fills in
// on its own (the default QOS, the IDs of dependencies) is not a change.
func specDiff(old, new *spec.Task) string {
	o, n := *old, *new
	if n.QOS == "" {
		o.QOS = ""
	}
	o.DependsOn = slices.Clone(o.DependsOn)
	for i := range o.DependsOn {
		o.DependsOn[i].IDs = nil
	}
	om, nm := fieldsOf(&o), fieldsOf(&n)
	var keys []string
	for k := range om {
		keys = append(keys, k)
	}
	for k := range nm {
		if _, ok := om[k]; !ok {
			keys = append(keys, k)
		}
	}
	slices.Sort(keys)
	var b strings.Builder
	for _, k := range keys {
		if om[k] != nm[k] {
			fmt.Fprintf(&b, "  %s: %s -> %s\n", k, orDash(om[k]), orDash(nm[k]))
		}
	}
	return b.String()
}

// fieldsOf is t's top-level fields as compact JSON texts.
func fieldsOf(t *spec.Task) map[string]string {
	data, _ := json.Marshal(t)
	var raw map[string]json.RawMessage
	_ = json.Unmarshal(data, &raw)
	out := make(map[string]string, len(raw))
	for k, v := range raw {
		out[k] = string(v)
	}
	return out
}

// replaceDecision is what apply does about an active run of the
// configuration's name.
type replaceDecision struct {
	replace bool   // stop it before submitting
	done    bool   // nothing to do (-y without --force, no change)
	prompt  string // the confirmation to ask
}

// decideReplace prints the active run and the changes, as dstack apply
// does, and says what to do.
func decideReplace(w io.Writer, active *api.Run, t *spec.Task, yes, force bool) replaceDecision {
	what := fmt.Sprintf("Active run %s already exists (ID %d, %s).", active.Name, active.ID, active.Status)
	prompt := fmt.Sprintf("Stop and replace the run %s? [y/n]: ", active.Name)
	diff := ""
	if active.Spec != nil {
		diff = specDiff(active.Spec, t)
	}
	if diff == "" {
		fmt.Fprintf(w, " %s Detected no changes.\n\n", what)
		if yes && !force {
			fmt.Fprintln(w, " Use --force to replace it anyway.")
			return replaceDecision{done: true}
		}
		return replaceDecision{replace: true, prompt: prompt}
	}
	fmt.Fprintf(w, " %s Detected changes (Berth replaces a run, it does not update it in place):\n%s\n", what, diff)
	return replaceDecision{replace: true, prompt: prompt}
}

// stopAndWait stops the run id and waits until it has finished, so that
// its name is free.
func stopAndWait(ctx context.Context, c *client.Client, w io.Writer, run *api.Run) error {
	fmt.Fprintf(w, "Stopping run %s (ID %d)...\n", run.Name, run.ID)
	ref := fmt.Sprint(run.ID)
	if _, err := c.Stop(ctx, ref, false); err != nil {
		return fmt.Errorf("stop %s: %w", run.Name, err)
	}
	for {
		r, err := c.Run(ctx, ref)
		if err != nil {
			return fmt.Errorf("stop %s: %w", run.Name, err)
		}
		if r.Status.Finished() {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(300 * time.Millisecond):
		}
	}
}

// scheduled reports a schedule just made: apply does not attach to it,
// there is nothing to follow until it fires.
func scheduled(ctx context.Context, c *client.Client, w io.Writer, run *api.Run) error {
	next := run.EstimatedStart
	if next == nil {
		if r, err := c.Run(ctx, fmt.Sprint(run.ID)); err == nil {
			next = r.EstimatedStart
		}
	}
	fmt.Fprintf(w, "Scheduled run %s (ID %d)", run.Name, run.ID)
	if next != nil {
		fmt.Fprintf(w, ": the next run starts at %s (in %s)", next.Local().Format("2006-01-02 15:04 MST"), time.Until(*next).Round(time.Second))
	}
	fmt.Fprintf(w, ".\nEach run it fires is listed by berth ps; stop the schedule with: berth stop %s\n", run.Name)
	return nil
}
