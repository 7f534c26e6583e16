// Package spec reads and checks Berth run configurations.
//
// Its one job: turn a dstack-compatible `type: task` YAML document into a
// typed, validated Task, or explain precisely (file:line:col, field path,
// suggestion) why it cannot. The same checks run on a Task that arrives as
// JSON (Task.Validate, or DecodeJSON, which also refuses unknown fields and
// trailing data), so the server and the CLI agree on what is valid. Every
// value is bounded (limits.go): durations, counts and sizes, the commands'
// and the environment's bytes (Limits), and a file's size, tokens and
// nesting before it is parsed.
//
// The package does no scheduling, no I/O beyond ParseFile, and keeps the
// schema unchanged from dstack: a file that dstack accepts as a task should
// parse here, and anything Berth cannot honour is refused by name rather
// than silently ignored.
//
// Parsing walks goccy/go-yaml's AST rather than unmarshalling, so that every
// problem carries the position of the offending token and all problems are
// reported at once. Values that have their own grammar (GPU specs, byte
// ranges, durations, cron lines, job-array indexes) are parsed by small
// exported functions that the CLI can reuse for its flags.
//
// Beyond dstack's schema, Berth reads Slurm's workflow options as fields of
// their own: `array` (ParseArray, ArraySpec, ForArrayTask), `depends_on`,
// `dependency_policy`, `singleton`, `kill_invalid_depend` and `groups`
// (heterogeneous runs). The package checks their syntax; resolving the runs
// a dependency names is the server's. `signal` (ParseSignal) is Slurm's
// --signal: a signal sent before `max_duration`.
package spec
