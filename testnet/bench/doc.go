// Package bench reproduces the experiments of the BEDWE paper (its §5)
// and replays real scientific workflows on a running testnet of real
// `bedwe node` processes: it generates the workflows (sequences, one wide
// FORK, nested FORKs), submits them through node/client, reads the
// origin's makespan and trace, samples the nodes' RSS and CPU from /proc,
// estimates pack sizes with package pack, and writes the results as CSV,
// SVG line plots and a Markdown report.
//
// It owns the measurement and its presentation only. It never starts or
// stops nodes itself beyond what [testnet.Up] and [testnet.Manifest.Down]
// do for a caller, never reaches into node internals (the nodes are
// observed from outside: the client protocol, /proc, their data
// directories), and never changes a node's configuration.
//
// # Experiments
//
//   - sequential: one sequence of n services, n in 5..200 (paper Fig. 9);
//   - parallel: one FORK of b branches of 10 services, b in 2..20 (Fig. 10);
//   - nested: 100 services in 1..5 nested FORKs (Fig. 11, see [Nested]);
//   - overhead: per-hop cost of a sequence, from makespan/n and from the
//     gaps between one step's end and the next step's start in the trace,
//     plus the size of the pack along the sequence ([PackGrowth]);
//   - resources: RSS and CPU of every node at idle and under load;
//   - wfcommons: WfCommons instances converted by grammar/wfcommons, their
//     makespan against the critical path of the converted workflow.
//
// The three scaling experiments run in two modes: "noop" (the echo builtin,
// so the makespan is pure engine overhead) and "sleepNms" (the sleep*
// builtin sleeps N ms per service, so the makespan has a known floor).
//
// Every point is repeated and reported as median, minimum and maximum.
package bench
