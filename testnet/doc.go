// Package testnet runs a local mesh of real `bedwe node` processes on
// loopback: it writes their configuration, starts and stops them, records a
// manifest, and drives chaos (SIGKILL and restart) and benchmarks. It drives
// the bedwe binary as a user would — processes, flags and files — and never
// reaches into node internals.
//
// Timetables: a testnet started with Options.Schedule gives every node the
// timetable, a shared virtual clock (Options.Clock, so a day of load
// shedding plays in minutes), a routing mode and DIR/trusted-keys (every
// node's public key). Manifest.FollowTimetable plays the timetable on the
// processes: SIGKILL at each zone's cut, restart at its restore. Compare
// runs the same seeded workload (MixedWorkflow) under a generated rotation
// (Rotation) once with timetable-aware and once with heartbeat-only
// routing, and measures completion, makespan, latency and re-run steps.
//
// Counting what happened: every node runs with --events DATA/events.jsonl
// (package node/events: suspicions, hand-offs, re-routes, deliveries,
// completions) and every services file names DIR/invocations.jsonl as its
// record file (one line per service invocation, written before it runs).
// Chaos counts outputs from the results and executions from these files
// (CountExecutions): a step silently run again after it was handed on, or an
// at-most-once step run twice, shows even when the result looks right. Soak
// counts the failure detector's events from them too.
package testnet
