package spec

import (
	"encoding/json"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func bytesp(b Bytes) *Bytes { return &b }

func durationp(d Duration) *Duration { return &d }

// TestParseVolume reads dstack's volume configurations (the ones from its
// volumes page, with Berth's backend) and refuses bad ones at
// file:line:col: field.
func TestParseVolume(t *testing.T) {
	tests := map[string]struct {
		in   string
		want *VolumeConfig
		errs []string
	}{
		"create": {
			in:   "type: volume\n# A name of the volume\nname: my-volume\nbackend: docker\nregion: local\nsize: 100GB\n",
			want: &VolumeConfig{Type: "volume", Name: "my-volume", Backend: "docker", Region: "local", Size: bytesp(100 << 30)},
		},
		"register": {
			in:   "type: volume\nname: my-volume\nproject: ml\nbackend: docker\nvolume_id: vol1235\n",
			want: &VolumeConfig{Type: "volume", Name: "my-volume", Project: "ml", Backend: "docker", VolumeID: "vol1235"},
		},
		"auto cleanup": {
			in:   "type: volume\nname: v3\nbackend: docker\nsize: 1GB\nauto_cleanup_duration: 1h\n",
			want: &VolumeConfig{Type: "volume", Name: "v3", Backend: "docker", Size: bytesp(1 << 30), AutoCleanupDuration: durationp(3600)},
		},
		"auto cleanup off": {
			in:   "type: volume\nname: v3\nbackend: docker\nsize: 1GB\nauto_cleanup_duration: -1\n",
			want: &VolumeConfig{Type: "volume", Name: "v3", Backend: "docker", Size: bytesp(1 << 30)},
		},
		"bare number is GB": {
			in:   "type: volume\nname: v2\nbackend: docker\nsize: 10\n",
			want: &VolumeConfig{Type: "volume", Name: "v2", Backend: "docker", Size: bytesp(10 << 30)},
		},
		"required fields": {
			in: "type: volume\n",
			errs: []string{
				"f.yml:1:1: name: required: runs mount the volume by its name (`volumes: [NAME:/path]`)",
				"f.yml:1:1: backend: required: the backend that makes the volume (Berth's: docker), or `node` and `path` for an instance volume",
				"f.yml:1:1: size: required to create a volume (or give `volume_id` to register one that exists)",
			},
		},
		"bad values": {
			in: "type: volume\nname: My_Vol\nbackend: docker\nsize: lots\nvolume_id: \"a b\"\n",
			errs: []string{
				`f.yml:2:7: name: "My_Vol" is not a valid volume name: use 2 to 41 lowercase letters, digits and hyphens, starting with a letter`,
				`f.yml:4:7: size:`,
				`f.yml:5:12: volume_id: "a b" is not a volume id`,
			},
		},
		"refused dstack fields": {
			in: "type: volume\nname: v1\nbackend: docker\nsize: 1GB\ntags: {a: b}\nclaim_name: pvc\n",
			errs: []string{
				"f.yml:5:1: tags: is not supported on volumes by Berth yet; remove it",
				"f.yml:6:1: claim_name: belongs to dstack's kubernetes backend, which Berth does not have",
			},
		},
		"unknown field": {
			in:   "type: volume\nname: v1\nbackend: docker\nsizes: 1GB\n",
			errs: []string{"f.yml:1:1: size: required", `f.yml:4:1: sizes: unknown field; did you mean "size"?`},
		},
		"instance volume": {
			in:   "type: volume\nname: cache\nnode: gpu-1\npath: /mnt/cache\n",
			want: &VolumeConfig{Type: "volume", Name: "cache", Node: "gpu-1", Path: "/mnt/cache"},
		},
		"instance volume needs node and path": {
			in: "type: volume\nname: cache\npath: mnt/cache/\n",
			errs: []string{
				"f.yml:1:1: node: required with `path`",
				`f.yml:3:7: path: must be an absolute path on the node, got "mnt/cache/"`,
			},
		},
		"instance volume with network fields": {
			in: "type: volume\nname: cache\nnode: n1\npath: /a/../b\nbackend: docker\nsize: 1GB\nauto_cleanup_duration: 1h\n",
			errs: []string{
				`f.yml:4:7: path: "/a/../b" is not a clean path: write "/b"`,
				"f.yml:5:10: backend: is a network volume's; an instance volume (`node` and `path`) is a directory on that node: remove it, or remove `node` and `path`",
				"f.yml:6:7: size: is a network volume's",
				"f.yml:7:24: auto_cleanup_duration: is a network volume's",
			},
		},
		"another type": {
			in:   "type: task\ncommands: [x]\n",
			errs: []string{`f.yml:1:7: type: this is a "task" configuration, not a volume; ` + "`berth apply` of a volume needs `type: volume`"},
		},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			got, err := ParseVolume("f.yml", []byte(tc.in))
			if tc.errs != nil {
				if got != nil || err == nil {
					t.Fatalf("ParseVolume = %+v, %v; want errors", got, err)
				}
				lines := strings.Split(err.Error(), "\n")
				if len(lines) != len(tc.errs) {
					t.Fatalf("got %d errors, want %d:\n%s", len(lines), len(tc.errs), err)
				}
				for i, want := range tc.errs {
					if !strings.HasPrefix(lines[i], want) {
						t.Errorf("error %d = %q, want it to start with %q", i, lines[i], want)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Fatalf("(-want +got)\n%s", diff)
			}
			if ConfigType([]byte(tc.in)) != "volume" {
				t.Errorf("ConfigType = %q, want volume", ConfigType([]byte(tc.in)))
			}
			data, _ := json.Marshal(got)
			var back VolumeConfig
			if err := json.Unmarshal(data, &back); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(got, &back); diff != "" {
				t.Errorf("JSON round trip (-want +got)\n%s", diff)
			}
			if err := back.Validate(); err != nil {
				t.Errorf("Validate: %v", err)
			}
		})
	}
}

// TestRunVolumeForms reads every form of a run's `volumes:` that dstack
// accepts.
func TestRunVolumeForms(t *testing.T) {
	in := `type: task
commands: [x]
volumes:
  - name: v1
    path: /data
  - v2:/cache
  - name: [vol-eu, vol-us]
    path: /any
  - data-${{ dstack.node_rank }}:/rank
  - /host/path:/h
  - instance_path: /mnt/x
    path: /x
    optional: true
  - /ro:/ro:ro
`
	task, err := Parse("f.yml", []byte(in))
	if err != nil {
		t.Fatal(err)
	}
	want := []Volume{
		{Name: "v1", Path: "/data"},
		{Name: "v2", Path: "/cache"},
		{Names: []string{"vol-eu", "vol-us"}, Path: "/any"},
		{Name: "data-${{ dstack.node_rank }}", Path: "/rank"},
		{InstancePath: "/host/path", Path: "/h"},
		{InstancePath: "/mnt/x", Path: "/x", Optional: true},
		{InstancePath: "/ro", Path: "/ro", ReadOnly: true},
	}
	if diff := cmp.Diff(want, task.Volumes); diff != "" {
		t.Fatalf("(-want +got)\n%s", diff)
	}
	for i, v := range task.Volumes {
		if v.IsNetwork() != (i < 4) {
			t.Errorf("volumes[%d].IsNetwork() = %v", i, v.IsNetwork())
		}
	}
	if got := task.Volumes[2].NetworkNames(); !cmp.Equal(got, []string{"vol-eu", "vol-us"}) {
		t.Errorf("NetworkNames = %v", got)
	}
}

func FuzzParseVolume(f *testing.F) {
	f.Add([]byte("type: volume\nname: my-volume\nbackend: docker\nregion: local\nsize: 100GB\n"))
	f.Add([]byte("type: volume\nname: v\nbackend: docker\nvolume_id: x\n"))
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := ParseVolume("f.yml", data)
		if (v == nil) == (err == nil) {
			t.Fatalf("ParseVolume returned %v and error %v", v, err)
		}
		if v != nil {
			if err := v.Validate(); err != nil {
				t.Fatalf("a parsed volume fails Validate: %v", err)
			}
		}
	})
}
