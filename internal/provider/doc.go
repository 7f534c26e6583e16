// Package provider is the boundary between Berth and whatever lends it
// machines: a cloud, a GPU marketplace, a Kubernetes cluster, or (the one
// provider that runs here) the local Docker engine. A provider answers four
// questions and nothing else: what can I get (Offers), get me one (Create),
// what is it doing (Get, List), give it back (Terminate); plus network
// volumes (CreateVolume, DeleteVolume, Volumes).
//
// Creation is idempotent by a key the caller chooses and records before the
// call: creating again with the same key returns the same instance, and
// List reports every instance by its key, so a server that crashed between
// recording and creating finds out after a restart which of its records
// have an instance behind them (see Reconcile). Providers never see Berth's
// store or scheduler.
package provider
