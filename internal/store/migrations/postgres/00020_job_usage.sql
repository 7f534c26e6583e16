-- +goose Up
-- What a job counts for in accounting, computed when it ends: JSON of
-- api.JobUsage (what it held, for how long, its fleet, its billing per
-- second under the TRESBillingWeights then in force). '' for jobs that
-- ended before it was kept: their alloc and times still give CPU-seconds.
ALTER TABLE jobs ADD COLUMN usage TEXT NOT NULL DEFAULT '';

-- +goose Down
ALTER TABLE jobs DROP COLUMN usage;
