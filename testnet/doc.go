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
package testnet
