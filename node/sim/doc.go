// Package sim is a deterministic simulator of a bedwe mesh: many nodes'
// protocol code in one goroutine, on a simulated network, disk and clock,
// driven by one seeded random source.
//
// A node is a Machine: it starts from its durable journal records and then
// handles one event at a time (a message, a timer, a sync completion)
// through its Env, which is the only way it reaches time, randomness, the
// network, the disk and the world. Nothing in a Machine blocks, starts a
// goroutine or reads the wall clock, so one event queue ordered by
// (virtual time, sequence number) decides every interleaving, and the same
// seed replays the same run event for event.
//
// The simulated world:
//   - Network: every message gets its own delay (a minimum plus an
//     exponential part), so messages reorder; it may be lost or duplicated,
//     and a link may be cut one way or both (checked when a message is sent
//     and again when it arrives).
//   - Disk: Append buffers a record; Sync makes everything appended so far
//     durable after a drawn latency and then tells the node. A kill loses
//     what was appended and not yet synced; a restart hands the node only
//     its durable records.
//   - Faults: kill, restart, pause (a frozen process: its events wait and
//     then arrive in a burst), link cuts and zone cuts (every node of a
//     zone killed at the same instant), at any instant between events.
//
// Determinism has two guards: every dispatched event is folded into a
// trace hash (Hash), and the tests run seeds twice and compare hashes.
// Randomness comes in independent streams (network, disk, faults,
// workload, one per node) split from the seed, so switching one fault
// class off does not shift every other draw.
package sim
