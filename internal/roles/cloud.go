package roles

import (
	"context"
	"crypto/sha256"
	"debug/elf"
	"encoding/hex"
	"fmt"
	"os"

	"github.com/berth-hq/berth/internal/policy"
	"github.com/berth-hq/berth/internal/provider"
	"github.com/berth-hq/berth/internal/provider/docker"
)

// cloudProviders makes the providers the policy file configures (issue
// 17). The owner that labels every instance defaults to a digest of the
// database's location, so a restarted server finds its own instances and
// two servers on one engine never touch each other's.
func cloudProviders(ctx context.Context, rules *policy.Policy, db string) ([]provider.Provider, func(), error) {
	d := rules.Docker
	if d == nil {
		return nil, func() {}, nil
	}
	owner := d.Owner
	if owner == "" {
		sum := sha256.Sum256([]byte(db))
		owner = hex.EncodeToString(sum[:6])
	}
	bin := d.Binary
	if bin == "" {
		exe, err := os.Executable()
		if err != nil {
			return nil, nil, fmt.Errorf("providers.docker: the server's binary: %w", err)
		}
		bin = exe
	}
	if err := staticBinary(bin); err != nil {
		return nil, nil, fmt.Errorf("providers.docker: %w; build berth with CGO_ENABLED=0 (make build) or name a static one in providers.docker.binary", err)
	}
	shapes := make([]docker.Shape, 0, len(d.Shapes))
	for _, s := range d.Shapes {
		shapes = append(shapes, docker.Shape{Name: s.Name, CPUs: s.CPUs, Memory: provider.Bytes(s.Memory), Price: s.Price, Spot: s.Spot, Zone: s.Zone})
	}
	p, err := docker.New(ctx, docker.Config{Owner: owner, Image: d.Image, Binary: bin, Network: d.Network, Shapes: shapes})
	if err != nil {
		return nil, nil, fmt.Errorf("providers.docker: %w", err)
	}
	return []provider.Provider{p}, func() { p.Close() }, nil
}

// staticBinary fails when path is dynamically linked: the instances'
// image (busybox) has no C library to load it with.
func staticBinary(path string) error {
	f, err := elf.Open(path)
	if err != nil {
		return fmt.Errorf("the berth binary %s: %w", path, err)
	}
	defer f.Close()
	for _, p := range f.Progs {
		if p.Type == elf.PT_INTERP {
			return fmt.Errorf("the berth binary %s is dynamically linked", path)
		}
	}
	return nil
}
