package server

import (
	"os"
	"testing"

	"github.com/berth-hq/berth/internal/store/pgtest"
)

// TestOnPostgres runs a representative set of the server's tests with
// their harnesses' state in PostgreSQL instead of SQLite (harnessStore
// tells them by this test's name): runs submitted, placed on real agents,
// run, stopped, failed and finished, their output, arrays and
// dependencies, idempotency keys, and restarts of the server that keep the
// queue, the running jobs' output and the keys. BERTH_TEST_DB=postgres
// runs every test of the package on PostgreSQL instead.
func TestOnPostgres(t *testing.T) {
	if os.Getenv("BERTH_TEST_DB") == "postgres" {
		t.Skip("BERTH_TEST_DB=postgres: every test runs on PostgreSQL already")
	}
	if !pgtest.Available() {
		t.Skip(pgtest.ErrMissing)
	}
	for _, tc := range []struct {
		name string
		test func(*testing.T)
	}{
		{"RunLifecycle", TestRunLifecycle},
		{"FailedRun", TestFailedRun},
		{"StopRunningRun", TestStopRunningRun},
		{"MultiNodeRun", TestMultiNodeRun},
		{"LogsCompleteInOrder", TestLogsCompleteInOrder},
		{"ServerRestartKeepsQueue", TestServerRestartKeepsQueue},
		{"FollowAcrossServerRestart", TestFollowAcrossServerRestart},
		{"AgentRestartFindsJobs", TestAgentRestartFindsJobs},
		{"IdempotencyKey", TestIdempotencyKey},
		{"BadSubmissionStoresNothing", TestBadSubmissionStoresNothing},
		{"DependencyChain", TestDependencyChain},
		{"Array", TestArray},
		{"StepRelaySurvivesRestart", TestStepRelaySurvivesRestart},
		{"SubmitLimitUnderConcurrency", TestSubmitLimitUnderConcurrency},
		{"AccountingUsage", TestAccountingUsage},
		{"ListRunsFilters", TestListRunsFilters},
		{"IDsNeverReissued", TestIDsNeverReissued},
		{"DeletedTokenStopsWorking", TestDeletedTokenStopsWorking},
	} {
		before := databases()
		if t.Run(tc.name, tc.test) && databases() == before {
			t.Errorf("%s made no PostgreSQL database: its server's store is not harnessStore's", tc.name)
		}
	}
}

// databases counts the PostgreSQL databases the harnesses made.
func databases() int {
	n := 0
	pgDatabases.Range(func(any, any) bool { n++; return true })
	return n
}
