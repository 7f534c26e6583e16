//go:build !slim

package cli

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"time"

	"github.com/spf13/cobra"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/spec"
)

func newBenchLargestCmd() *cobra.Command {
	return &cobra.Command{
		Use:   "largest",
		Short: "Other users' submission latency and the server's memory while the largest allowed requests are submitted",
		Long: `Starts a server (no agent: nothing runs) with its default bounds and, while one client submits
trivial runs one after another and times each, submits the largest requests those bounds allow,
one at a time: a run on --max-nodes-per-run nodes (10,000), an array of --max-array-size tasks
(1,000,001), and a 4 MB script (--max-script-size). Prints, for each, how long its submission
took and the trivial submissions' latency meanwhile (p50, p99, worst), and the server's resident
memory before, after and at its peak.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, _ []string) error {
			ctx := cmd.Context()
			out := cmd.OutOrStdout()
			b, err := startBenchServer(ctx, false)
			if err != nil {
				return err
			}
			defer b.stop()
			nodes := &spec.Task{Type: "task", Commands: []string{"true"}, Nodes: 10_000}
			array := &spec.Task{Type: "task", Commands: []string{"true"}, Array: "0-1000000"}
			script := &spec.Task{Type: "task", Commands: []string{"#!/bin/bash\n" + strings.Repeat("# padding padding padding padding\n", (4<<20-64)/34)}}
			for _, big := range []struct {
				name string
				t    *spec.Task
			}{{"10,000 nodes", nodes}, {"1,000,001 array tasks", array}, {"a 4 MB script", script}} {
				big.t.Normalize()
				before, _ := procMemory(b.cmd.Process.Pid)
				took, lat, err := alongside(ctx, b, big.t)
				if err != nil {
					return fmt.Errorf("%s: %w", big.name, err)
				}
				rss, peak := procMemory(b.cmd.Process.Pid)
				fmt.Fprintf(out, "largest: %s submitted in %s; meanwhile %d trivial submissions, p50 %s, p99 %s, worst %s; server RSS %s before, %s after (peak so far %s)\n",
					big.name, ms(took), len(lat), ms(percentile(lat, 0.5)), ms(percentile(lat, 0.99)), ms(percentile(lat, 1)), mib(before), mib(rss), mib(peak))
			}
			return nil
		},
	}
}

// alongside submits big while one client submits trivial runs from a
// second before until a second after; it returns big's submission time
// and the trivial submissions' latencies.
func alongside(ctx context.Context, b *benchServer, big *spec.Task) (took time.Duration, lat []time.Duration, err error) {
	small := benchTask("true")
	done := make(chan struct{})
	var wg sync.WaitGroup
	var serr error
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			t0 := time.Now()
			if _, err := b.c.Submit(ctx, api.SubmitRequest{Spec: small}); err != nil {
				serr = err
				return
			}
			lat = append(lat, time.Since(t0))
		}
	}()
	time.Sleep(time.Second)
	t0 := time.Now()
	_, err = b.c.Submit(ctx, api.SubmitRequest{Spec: big})
	took = time.Since(t0)
	time.Sleep(time.Second)
	close(done)
	wg.Wait()
	if err == nil {
		err = serr
	}
	return took, lat, err
}
