package control

import (
	"testing"

	"github.com/berth-hq/berth/internal/api"
)

func TestNodeStatus(t *testing.T) {
	fail := &api.NodeHealth{Status: api.HealthFailure, Reason: "XID 79"}
	warn := &api.NodeHealth{Status: api.HealthWarning, Reason: "hot"}
	manual := &api.NodeDrain{Reason: "maintenance"}
	tests := []struct {
		online, unreachable bool
		jobs                int
		c                   nodeCond
		status, reason      string
	}{
		{online: true, status: "idle"},
		{online: true, jobs: 2, status: "busy"},
		{online: true, c: nodeCond{Health: &api.NodeHealth{Status: api.HealthOK}}, status: "idle"},
		{online: true, c: nodeCond{Health: warn}, status: "idle (warning)", reason: "hot"},
		{online: true, jobs: 1, c: nodeCond{Health: fail}, status: "busy (failure)", reason: "XID 79"},
		{online: true, c: nodeCond{Manual: manual}, status: "drained (maintenance)", reason: "maintenance"},
		{online: true, c: nodeCond{Manual: &api.NodeDrain{}}, status: "drained"},
		{online: true, jobs: 1, c: nodeCond{Manual: &api.NodeDrain{Reason: "psu", Down: true}}, status: "down (psu)", reason: "psu"},
		{online: true, jobs: 1, c: nodeCond{Manual: manual, Health: fail}, status: "draining (maintenance)", reason: "maintenance; health failure: XID 79"},
		{online: true, c: nodeCond{Manual: &api.NodeDrain{}, Health: warn}, status: "drained", reason: "health warning: hot"},
		{status: "offline"},
		{c: nodeCond{Manual: manual}, status: "offline", reason: "maintenance"},
		{unreachable: true, status: "unreachable"},
	}
	for _, tc := range tests {
		status, reason := nodeStatus(tc.online, tc.unreachable, tc.jobs, &tc.c)
		if status != tc.status || reason != tc.reason {
			t.Errorf("nodeStatus(%v, %v, %d, %+v) = %q, %q; want %q, %q", tc.online, tc.unreachable, tc.jobs, tc.c, status, reason, tc.status, tc.reason)
		}
	}
	if (&nodeCond{Health: warn}).drained() || !(&nodeCond{Health: fail}).drained() || !(&nodeCond{Manual: manual}).drained() {
		t.Error("drained: a warning drains, or a failure or a manual drain does not")
	}
}
