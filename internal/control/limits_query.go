package control

// NodeLimits is what each node says of resources.disk
// (api.NodeInfo.Disk), by node name: the plan tells where it holds.
func (s *Cluster) NodeLimits() map[string]string {
	out := make(map[string]string, len(s.nodes))
	for _, ns := range s.nodes {
		out[ns.info.Name] = ns.info.Disk
	}
	return out
}
