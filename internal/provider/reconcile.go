package provider

import "sort"

// RecordState is an instance's state in Berth's store. The server writes
// RecordCreating before it calls Create, so that a crash at any point
// leaves a record to reconcile against what the provider has.
type RecordState string

const (
	RecordCreating    RecordState = "creating"    // recorded; Create may or may not have happened
	RecordActive      RecordState = "active"      // Create returned
	RecordTerminating RecordState = "terminating" // Terminate asked for, not yet confirmed
	RecordGone        RecordState = "gone"        // no instance behind it any more
)

// Record is what the store knows of one instance.
type Record struct {
	Key   string
	State RecordState
}

// Action is one step that brings records and instances together.
type Action struct {
	Key string
	// Do is one of: "adopt" (the record becomes active: the provider has
	// it), "gone" (the record's instance does not exist: mark it gone),
	// "terminate" (the provider has an instance nothing should have: end
	// it, then mark its record gone if there is one).
	Do     string
	Record bool // a record exists for Key
}

// Reconcile compares the store's records with the provider's instances
// after a restart (or periodically) and says what to do, so that no
// instance is leaked (every instance the provider holds has a live record,
// or is terminated) and none is doubled (a creating record whose instance
// exists is adopted, never created again). It is pure: the caller applies
// the actions. Records whose Create is in flight in this process must be
// left out of records and their keys out of instances' consideration by
// the caller (pass them in skip).
func Reconcile(records []Record, instances []Instance, skip map[string]bool) []Action {
	have := map[string]Instance{}
	for _, in := range instances {
		have[in.Key] = in
	}
	known := map[string]bool{}
	var out []Action
	for _, r := range records {
		if skip[r.Key] {
			known[r.Key] = true
			continue
		}
		in, ok := have[r.Key]
		switch r.State {
		case RecordGone:
			continue // an instance under a gone record is a leak: below
		case RecordCreating:
			known[r.Key] = true
			if ok {
				out = append(out, Action{Key: r.Key, Do: "adopt", Record: true})
			} else {
				out = append(out, Action{Key: r.Key, Do: "gone", Record: true})
			}
		case RecordActive:
			known[r.Key] = true
			if !ok {
				out = append(out, Action{Key: r.Key, Do: "gone", Record: true})
			} else if in.State == StateStopped {
				// Taken back or killed from outside: an interruption.
				out = append(out, Action{Key: r.Key, Do: "terminate", Record: true})
			}
		case RecordTerminating:
			known[r.Key] = true
			if ok {
				out = append(out, Action{Key: r.Key, Do: "terminate", Record: true})
			} else {
				out = append(out, Action{Key: r.Key, Do: "gone", Record: true})
			}
		}
	}
	var leaks []string
	for k := range have {
		if !known[k] && !skip[k] {
			leaks = append(leaks, k)
		}
	}
	sort.Strings(leaks)
	for _, k := range leaks {
		out = append(out, Action{Key: k, Do: "terminate"})
	}
	return out
}
