package sim

import (
	"fmt"
	"testing"
	"time"

	"github.com/berth-hq/berth/internal/sched"
)

func TestScratch(t *testing.T) {
	for _, f := range []string{"KTH-SP2-1996-2.1-cln.swf.gz", "NASA-iPSC-1993-3.1-cln.swf.gz"} {
		tr, err := OpenSWF("/work/shared/traces/" + f)
		if err != nil {
			t.Fatal(err)
		}
		jobs, drops := Keep(tr.Jobs, tr.MaxProcs)
		for _, p := range []sched.Policy{sched.FCFS, sched.EASY, sched.Conservative} {
			t0 := time.Now()
			res, err := Run(jobs, Config{Procs: tr.MaxProcs, Policy: p, Schedule: refSchedule})
			if err != nil {
				t.Fatal(err)
			}
			m := res.Metrics()
			fmt.Printf("%s P=%d policy=%d drops=%v %+v passes=%d events=%d wall=%v\n", f, tr.MaxProcs, p, drops, m, res.Passes, res.Events, time.Since(t0))
		}
	}
}
