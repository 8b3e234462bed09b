// Package wfcommons imports real scientific workflows — WfCommons instances
// in WfFormat JSON — into the bedwe language: [Load] reads a file into an
// [Instance] (tasks, dependencies, runtimes), and [Convert] turns it into a
// [grammar.Workflow] whose services are the tasks.
//
// The package owns the reading of WfFormat and the conversion from a DAG to
// a series-parallel workflow. It never parses or checks bedwe source (that is
// package grammar), never runs anything, and touches no files: callers hand
// it a reader and get a tree.
//
// # Formats
//
// WfFormat 1.5 and 1.6 keep tasks in workflow.specification.tasks (name, id,
// parents and children by id) and runtimes in workflow.execution.tasks
// (runtimeInSeconds, command.program) joined on id. 1.3 and 1.4 keep one list
// under workflow.tasks with parents (and optionally children) by name and
// runtime (1.3) or runtimeInSeconds (1.4); the same shape under
// workflow.jobs (before 1.3) is read too. Dependencies may be declared on one
// end only, so parents and children are merged. Load rejects unknown task
// references, duplicate ids, bad runtimes and dependency cycles (naming the
// cycle).
//
// # Conversion
//
// The language expresses exactly the vertex series-parallel orders: a
// sequence runs its steps one after another, a FORK runs its branches side by
// side. Convert first drops transitive dependencies (a→c when a→b→c: the
// relation is unchanged), then decomposes the DAG top-down. A piece of the
// DAG (initially all of it) is
//
//   - one task: a service;
//   - disconnected (its comparability graph falls apart): a FORK of its
//     components;
//   - cut into series parts, where every task of a part precedes every task
//     of the next (found in one pass over a topological order: moving task x
//     across a prefix cut changes the number of ordered crossing pairs by
//     descendants(x) − ancestors(x) inside the piece): a sequence of parts;
//   - otherwise prime: it contains an "N" (a→c, a→d, b→d without b→c) and no
//     series-parallel workflow has its exact order.
//
// A series-parallel DAG never reaches the last case, so it converts exactly:
// the workflow's dependency relation equals the original. A prime piece must
// become a sequence P then Q with P a down-set (closed under predecessors),
// which adds the pairs P×Q the piece does not already order. The heuristic
// draws candidate cuts from eight linear extensions of the piece (by
// position, ASAP and ALAP level, earliest start and finish, latest start and
// finish, and the middle of the start window; every prefix of a linear
// extension is a down-set) and scores each prefix cut in O(1): the pairs it
// adds, and the critical path P then Q would have if both sides convert
// exactly. It keeps within a budget — the path length the piece may take
// without lengthening the whole workflow, starting from the original critical
// path and handed down to series parts and cut sides — and among cuts within
// budget takes the lowest share of added pairs (added / |P|·|Q|; the count
// alone favours peeling one task at a time into long chains); when no cut
// fits, the shortest path wins. Both sides are then decomposed again.
//
// Quality on the six WfCommons instances of the test data: the four
// series-parallel ones convert exactly; montage (103 tasks) gets 189 added
// edges (385 ordered pairs) and cycles (67 tasks) 33 edges (124 pairs), both
// without lengthening the critical path, where a level-by-level conversion
// (every ASAP level a FORK) adds 1047 and 993 edges and lengthens the path by
// 4.2 % and 1.7 %. On synthetic three-band Montages with uniformly random
// runtimes (a harder case: every task is as long as every other) the path
// grows 14.6 % at 187 tasks and 0.6 % at 1207 tasks, against 21.8 % and
// 14.9 % level by level. The cut search is greedy, not optimal: the minimum
// series-parallel completion is a hard problem, and the budget uses lower
// bounds for the sides, so the path can still grow. Result reports by how
// much, and Convert checks before returning that no original dependency was
// lost.
//
// Result.AddedEdges counts the direct dependencies of the converted workflow
// (last services of a step to first services of the next) that the original
// does not imply. It is the least number of edges one would add to the
// original DAG to get the converted order: a covering pair of the new order
// can only come from an edge of its own. Result.AddedPairs counts the
// ordered task pairs added, the parallelism given up.
//
// The result always passes grammar.Check under Options.Limits: FORKs wider
// than MaxArms are nested (parallel composition is associative), names are
// cut to MaxNameLen, and a workflow nested deeper than MaxDepth is an error.
//
// Cost: two n×n bit matrices (closure and its transpose) and, per piece,
// linear work over its members plus popcounts over its span, and for a prime
// piece eight sorts; real instances have few prime pieces (a 6007-task
// synthetic Montage converts in about 0.2 s), while a random DAG, prime
// almost everywhere, costs O(n² log n). Instances above [MaxTasks] are
// refused.
//
// # Services, runtimes and testnets
//
// Each task becomes one service named after the task (sanitised to the NAME
// charset [A-Za-z0-9_.-], keywords suffixed with '_', clashes numbered _2,
// _3, ..., all behind Options.ServicePrefix), so the names are unique and no
// FORK produces an output label twice. Each service carries
// expect=<runtime × Options.Scale>, rounded to the millisecond, at least
// max(Options.MinSleep, 1ms) (expect= drives power-aware peer choice).
//
// A testnet replays the workflow with the sleep builtin of package
// node/service. Every node declares all imported names at once with a
// pattern (match "wf.*" with ServicePrefix "wf."):
//
//	patterns:
//	  - {match: "*", kind: sleep, from_request: true, duration: 10ms}
//
// and the workflow is submitted with the input {"sleep_ms": M}, where M is
// [Result.SleepMillis] (milliseconds by service name; `bedwe import
// wfcommons --input FILE` writes it): a from_request sleep looks its own
// service name up in that object. The services file may scale or cap the
// times again (scale:, max:). The step attribute sleep=, which that builtin
// reads first, is not written: the language rejects attributes it does not
// know.
package wfcommons
