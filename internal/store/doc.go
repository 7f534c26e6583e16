// Package store keeps Berth's state durable: projects, users, tokens, runs,
// jobs, nodes, events and log chunks, behind one interface so that callers do
// not know whether SQLite (the default, one file) or PostgreSQL holds them.
//
// Writes go through Apply, which commits a Batch of upserts and inserts in one
// transaction; the server merges many callers' batches into one Apply (group
// commit). Every write is an idempotent upsert keyed by ID, so replaying a
// batch after a crash changes nothing.
package store
