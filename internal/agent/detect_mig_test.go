package agent

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/berth-hq/berth/internal/api"
)

func TestWithMIG(t *testing.T) {
	gpus, err := parseNvidiaSMI([]byte("0, GPU-aaa, NVIDIA A100-SXM4-40GB, 40960\n1, GPU-bbb, NVIDIA A100-SXM4-40GB, 40960\n"))
	if err != nil {
		t.Fatal(err)
	}
	list := []byte(`GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaa)
  MIG 3g.20gb     Device  0: (UUID: MIG-11111111-2222-3333-4444-555555555555)
  MIG 2g.10gb     Device  1: (UUID: MIG-66666666-7777-8888-9999-000000000000)
GPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbb)
`)
	want := []api.GPU{
		{Index: 1, Vendor: "nvidia", Name: "NVIDIA A100-SXM4-40GB", Memory: 40960 << 20, UUID: "GPU-bbb"},
		{Index: 2, Vendor: "nvidia", Name: "NVIDIA A100-SXM4-40GB MIG 3g.20gb", Memory: 20 << 30, UUID: "MIG-11111111-2222-3333-4444-555555555555"},
		{Index: 3, Vendor: "nvidia", Name: "NVIDIA A100-SXM4-40GB MIG 2g.10gb", Memory: 10 << 30, UUID: "MIG-66666666-7777-8888-9999-000000000000"},
	}
	if diff := cmp.Diff(want, withMIG(gpus, list)); diff != "" {
		t.Errorf("devices (-want +got):\n%s", diff)
	}
	// Without MIG, the list changes nothing.
	if diff := cmp.Diff(gpus, withMIG(gpus, []byte("GPU 0: NVIDIA A100-SXM4-40GB (UUID: GPU-aaa)\nGPU 1: NVIDIA A100-SXM4-40GB (UUID: GPU-bbb)\n"))); diff != "" {
		t.Errorf("no MIG (-want +got):\n%s", diff)
	}
}
