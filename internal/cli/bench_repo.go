//go:build !slim

package cli

import (
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/client"
	"github.com/berth-hq/berth/internal/spec"
)

func newBenchRepoCmd() *cobra.Command {
	var sizeMB int
	cmd := &cobra.Command{
		Use:   "repo",
		Short: "Time berth apply's repo upload of a large Git tree: the first apply, then an unchanged second one",
		Long: `Makes a Git repository of --size MB (a tenth in 1,000 small text files, the rest in 100 files of
random bytes, which do not compress: the worst case for the wire), starts a server with its local
agent, and applies a task with repos: [.] twice, as berth apply does: pack the work tree, ask the
server for its digest, upload it if absent, submit, and wait for the run's end (its node fetches
and unpacks the tree before the command runs). Prints, for each apply, the time to pack, to check
and upload, and from submission to the run's end, and the bytes sent.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			dir, err := os.MkdirTemp("", "berth-bench-repo-")
			if err != nil {
				return err
			}
			defer os.RemoveAll(dir)
			if err := benchTree(dir, int64(sizeMB)<<20); err != nil {
				return err
			}
			b, err := startBenchServer(ctx, true)
			if err != nil {
				return err
			}
			defer b.stop()
			if err := b.waitNodes(ctx, 1); err != nil {
				return err
			}
			conf := filepath.Join(dir, ".berth.yml")
			for i, label := range []string{"first apply", "second apply (unchanged)"} {
				t := &spec.Task{Type: "task", Name: fmt.Sprintf("repo-%d", i), Commands: []string{"test -f big-0.bin && test -f src/file-999.txt"}, Repos: []spec.Repo{{LocalPath: "."}}}
				t.Normalize()
				t0 := time.Now()
				carry, err := packRun(t, conf, 4<<30)
				if err != nil {
					return err
				}
				packed := time.Since(t0)
				t1 := time.Now()
				sent, err := upload(ctx, b.c, carry, &strings.Builder{})
				if err != nil {
					return err
				}
				uploaded := time.Since(t1)
				t2 := time.Now()
				run, err := b.c.Submit(ctx, api.SubmitRequest{Spec: t})
				if err != nil {
					return err
				}
				end, err := b.c.Logs(ctx, fmt.Sprint(run.ID), client.LogOptions{Follow: true, Job: -1}, func(api.LogEntry) {})
				if err != nil {
					return err
				}
				if end == nil || end.Status != api.StatusDone {
					return fmt.Errorf("%s: the run did not end done: %+v", label, end)
				}
				ran := time.Since(t2)
				fmt.Fprintf(out, "repo: %s: %d files, %d MB of content, archive %.1f MB; pack %s, check+upload %s (%.1f MB sent), submit to end of run (fetch, unpack, run) %s; total %s\n",
					label, carry[0].arc.Files, carry[0].arc.Bytes>>20, float64(len(carry[0].arc.Data))/(1<<20), ms(packed), ms(uploaded), float64(sent)/(1<<20), ms(ran), ms(time.Since(t0)))
			}
			return nil
		},
	}
	cmd.Flags().IntVar(&sizeMB, "size", 50, "the tree's size in MB")
	return cmd
}

// benchTree makes a committed Git repository of about size bytes in dir.
func benchTree(dir string, size int64) error {
	r := rand.New(rand.NewPCG(1, 2))
	small := size / 10 / 1000
	for i := range 1000 {
		p := filepath.Join(dir, "src", fmt.Sprintf("file-%d.txt", i))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			return err
		}
		line := fmt.Sprintf("line of file %d, as source code is: mostly text\n", i)
		if err := os.WriteFile(p, []byte(strings.Repeat(line, int(small)/len(line)+1)), 0o644); err != nil {
			return err
		}
	}
	big := (size - size/10) / 100
	buf := make([]byte, big)
	for i := range 100 {
		for j := range buf {
			buf[j] = byte(r.Uint32())
		}
		if err := os.WriteFile(filepath.Join(dir, fmt.Sprintf("big-%d.bin", i)), buf, 0o644); err != nil {
			return err
		}
	}
	for _, args := range [][]string{{"init", "-q"}, {"add", "-A"}, {"commit", "-qm", "bench"}} {
		c := exec.Command("git", append([]string{"-C", dir, "-c", "user.name=bench", "-c", "user.email=bench@example.com"}, args...)...)
		if out, err := c.CombinedOutput(); err != nil {
			return fmt.Errorf("git %v: %v: %s", args, err, out)
		}
	}
	return nil
}
