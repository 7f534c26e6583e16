package server

import (
	"context"
	"encoding/json"
	"maps"
	"slices"
	"time"

	"github.com/berth-hq/berth/internal/api"
	"github.com/berth-hq/berth/internal/store"
)

// Stored metrics (issue 18). Each sample an agent sends is kept in the
// store (level 0) as well as in memory (metrics.go, for the Prometheus
// collector and jobs' peaks), so that `berth metrics` shows a run's
// history after a restart of the server and once the run has ended. Past
// MetricsRaw (an hour) the server folds a job's samples into one a minute
// (level 1), and drops both levels past MetricsRetention.

const (
	// foldEvery is how often the server folds and cuts samples.
	foldEvery = 5 * time.Minute
	// foldPage bounds the samples one fold reads.
	foldPage = 50_000
)

// sampleRows are the accepted samples as the store keeps them.
func sampleRows(samples []sample) []*store.MetricSample {
	rows := make([]*store.MetricSample, 0, len(samples))
	for _, x := range samples {
		s := x.s
		id := s.JobID
		s.JobID = 0 // implied by the row
		data, err := json.Marshal(s)
		if err != nil {
			continue
		}
		rows = append(rows, &store.MetricSample{JobID: id, Time: s.Time, Data: data})
	}
	return rows
}

// storedSamples are the jobs' samples in the store, by job, oldest first,
// each job's newest limit (<= 0: all).
func (s *Server) storedSamples(ctx context.Context, jobIDs []int64, limit int) (map[int64][]api.JobSample, error) {
	rows, err := s.store.ListSamples(ctx, jobIDs, limit)
	if err != nil {
		return nil, err
	}
	out := map[int64][]api.JobSample{}
	for _, r := range rows {
		var js api.JobSample
		if json.Unmarshal(r.Data, &js) != nil {
			continue
		}
		js.Time = r.Time
		out[r.JobID] = append(out[r.JobID], js)
	}
	return out, nil
}

// foldLoop folds and cuts the stored samples every foldEvery.
func (s *Server) foldLoop(ctx context.Context) {
	t := time.NewTicker(foldEvery)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := s.foldSamples(ctx, s.clock.Now()); err != nil && ctx.Err() == nil {
				s.log.Warn("metrics samples not folded", "err", err)
			}
		}
	}
}

// foldSamples folds the level-0 samples taken before now less MetricsRaw
// into one a minute per job, each fold and the removal of what it folds in
// one transaction, then drops the samples older than MetricsRetention.
func (s *Server) foldSamples(ctx context.Context, now time.Time) error {
	cut := now.Add(-s.cfg.MetricsRaw)
	for {
		rows, err := s.store.SamplesBefore(ctx, 0, cut, foldPage)
		if err != nil {
			return err
		}
		if len(rows) == 0 {
			break
		}
		// A full page may end inside a minute: that minute waits for the
		// next page, unless it is all the page holds.
		upto := cut
		if len(rows) == foldPage {
			if m := rows[len(rows)-1].Time.Truncate(time.Minute); m.After(rows[0].Time.Truncate(time.Minute)) {
				upto = m
			}
		}
		b := foldRows(rows, upto)
		if b.Empty() {
			break
		}
		if err := s.commitNow(b); err != nil {
			return err
		}
		if len(rows) < foldPage {
			break
		}
	}
	old := now.Add(-s.cfg.MetricsRetention)
	return s.commitNow(&store.Batch{SampleCuts: []store.SampleCut{{Level: 0, Before: old}, {Level: 1, Before: old}}})
}

// commitNow makes b durable through the committer and waits for it.
func (s *Server) commitNow(b *store.Batch) error {
	s.mu.Lock()
	done := s.enqueue(b)
	s.unlock()
	return <-done
}

// foldRows folds the samples taken before upto into a sample a minute per
// job (what each minute held: mean CPU and GPU use, the most memory), and
// cuts what it folded.
func foldRows(rows []*store.MetricSample, upto time.Time) *store.Batch {
	type bucket struct {
		job int64
		at  time.Time
	}
	groups := map[bucket][]api.JobSample{}
	var order []bucket
	for _, r := range rows {
		if !r.Time.Before(upto) {
			continue
		}
		var js api.JobSample
		if json.Unmarshal(r.Data, &js) != nil {
			continue
		}
		js.Time = r.Time
		k := bucket{r.JobID, r.Time.Truncate(time.Minute)}
		if _, ok := groups[k]; !ok {
			order = append(order, k)
		}
		groups[k] = append(groups[k], js)
	}
	b := &store.Batch{}
	for _, k := range order {
		data, err := json.Marshal(foldMinute(k.at, groups[k]))
		if err != nil {
			continue
		}
		b.Samples = append(b.Samples, &store.MetricSample{JobID: k.job, Level: 1, Time: k.at, Data: data})
		end := k.at.Add(time.Minute)
		if upto.Before(end) {
			end = upto
		}
		b.SampleCuts = append(b.SampleCuts, store.SampleCut{JobID: k.job, Level: 0, From: k.at, Before: end})
	}
	return b
}

// foldMinute is one sample standing for a minute's ss (in time order),
// taken at at, the minute's start.
func foldMinute(at time.Time, ss []api.JobSample) api.JobSample {
	out := api.JobSample{Time: at}
	var cpu float64
	var cpus int
	gpus := map[int]*api.GPUSample{}
	gpuN := map[int]int{}
	for _, s := range ss {
		if s.CPUPercent != nil {
			cpu += *s.CPUPercent
			cpus++
		}
		out.CPUSeconds = max(out.CPUSeconds, s.CPUSeconds)
		out.MemoryUsed = max(out.MemoryUsed, s.MemoryUsed)
		out.MemoryUsage = max(out.MemoryUsage, s.MemoryUsage)
		out.MemoryPeak = max(out.MemoryPeak, s.MemoryPeak)
		if s.MemoryLimit != 0 {
			out.MemoryLimit = s.MemoryLimit
		}
		for _, g := range s.GPUs {
			f := gpus[g.Index]
			if f == nil {
				f = &api.GPUSample{Index: g.Index}
				gpus[g.Index] = f
			}
			f.UUID, f.MemoryTotal = g.UUID, g.MemoryTotal
			f.Util += g.Util
			f.MemoryUsed = max(f.MemoryUsed, g.MemoryUsed)
			gpuN[g.Index]++
		}
	}
	if cpus > 0 {
		mean := cpu / float64(cpus)
		out.CPUPercent = &mean
	}
	for _, i := range slices.Sorted(maps.Keys(gpus)) {
		g := *gpus[i]
		g.Util /= float64(gpuN[i])
		out.GPUs = append(out.GPUs, g)
	}
	return out
}
