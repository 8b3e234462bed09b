// Package service owns the local services a bedwe peer declares and runs: the
// services file that lists them, the registry that answers "does this peer
// offer service NAME?", and the invocation of one service attempt (a command,
// an HTTP endpoint or a builtin) with its timeout, cancellation and typed
// errors.
//
// A message pack only names a service; a peer never runs anything it has not
// declared here. The package knows nothing about packs, peers, networks,
// retries or journals: the node decides when to invoke, how often to retry and
// what to do with the result. It never touches files other than the services
// file it is asked to load, the record file that file may name and the
// commands that file declares.
//
// # The services file
//
// The services file is YAML with a version number. Every entry under
// services declares one named service; entries under patterns declare a
// service for every name that matches a glob (path.Match syntax), which is how
// a testnet offers hundreds of WfCommons task names without listing them. An
// explicit entry always wins over a pattern, and patterns are tried in file
// order.
//
//	version: 1
//	record: calls.jsonl  # optional: log every invocation (see below)
//	services:
//	  # exec: run a command; it reads the JSON request on stdin and writes a
//	  # JSON object on stdout. Non-zero exit is a failure. The command must be
//	  # an absolute path or a bare name found in PATH when the file is loaded.
//	  resize:
//	    kind: exec
//	    command: ["/usr/bin/resize", "--fast"]
//	    timeout: 30s       # per attempt; the whole process group is killed
//	    grace: 2s          # optional: SIGTERM first, SIGKILL after 2s
//	    env: {A: b}        # added to the node's environment
//	    dir: /tmp          # working directory (absolute, must exist)
//	    expect: 5s         # expected run time, for power-aware peer choice
//	    max_concurrent: 2  # at most 2 at once on this peer (queued beyond)
//	  # http: POST the JSON request; a 2xx JSON object body is the result.
//	  notify:
//	    kind: http
//	    url: "http://127.0.0.1:8080/notify"
//	    timeout: 5s
//	    headers: {X-Key: abc}
//	  # builtins, for testing
//	  S1: {kind: sleep, duration: 50ms}
//	  S2: {kind: echo}
//	  # fail: fails with a probability; with a seed, each attempt's outcome
//	  # is a hash of the seed and its idempotency key, so a run replays
//	  # exactly on every peer, and a retry draws again.
//	  flaky: {kind: fail, probability: 0.3, seed: 1}
//	  # sleep for a time named by the request: the input field sleep_ms (a
//	  # number of milliseconds, {"sleep_ms": 1500}, or an object of
//	  # milliseconds by service name, {"sleep_ms": {"task": 1500}}), else
//	  # duration; times scale, then max caps the result. (A request built by
//	  # an embedder may also carry the attribute sleep=1.5s, read first; the
//	  # workflow language has no such attribute.)
//	  task: {kind: sleep, from_request: true, field: sleep_ms, scale: 0.01, max: 10s, duration: 10ms}
//	patterns:
//	  - {match: "S*", kind: sleep, duration: 10ms}
//	  - {match: "mProject_*", kind: exec, command: [/opt/wf/run-task]}
//
// Fields every kind accepts: kind (required), timeout (per attempt; none
// means only the caller's context limits it), expect (the expected run
// time; it defaults to the sleep duration for sleep and to timeout for exec
// and http) and max_concurrent (at most this many executions at once on
// this peer, besides the peer's own limit; for a pattern, all the names it
// matches share the limit; see [Concurrency]). Unknown fields and kinds are rejected; every error carries the
// line and column of the offending YAML node.
//
// # The record file
//
// When the file sets record (a path; a relative one is relative to the
// services file's directory, or to the current directory for [Parse]), every
// invocation of a service of the registry, explicit or pattern, of any kind,
// appends one line of JSON, an [InvocationRecord], to that file before the
// service runs:
//
//	{"at":"2025-01-02T03:04:05.123456789Z","workflow":"wf-1","step":"3/f1/0","service":"S1","attempt":2,"key":"wf-1:3/f1/0:2","peer":"12D3KooW...","once":false}
//
// A line says that an execution started, whatever its outcome, so a process
// killed mid-step has already written it; an attempt whose context is done
// before it starts runs nothing and writes nothing. Each line is one append
// write, so several processes can share one file; there is no fsync. If the
// file cannot be opened or written, Invoke returns a *[Failure] and does not
// run the service. The record is for audits and reliability tests, which
// count what happened rather than what was reported ([ReadRecords] reads it
// back); it grows without bound, so it is meant for testnets and audits, not
// for production peers.
//
// # Invocation
//
// [Service.Invoke] takes a [Request] and returns the service's JSON object or
// one of three kinds of error, which the node tells apart with errors.As and
// errors.Is:
//
//   - *[Failure]: the service ran (or could not be run) and failed: non-zero
//     exit, bad output, HTTP error status, injected failure.
//   - *[Timeout]: the attempt's own timeout, or the caller's deadline, expired;
//     errors.Is(err, context.DeadlineExceeded) holds.
//   - an error wrapping context.Canceled: the caller cancelled the attempt.
//
// An exec command runs in its own process group. On timeout or cancellation
// the whole group is killed (SIGKILL, after the optional SIGTERM grace), and
// Invoke returns promptly even if a grandchild that escaped the group (setsid)
// still holds the output pipes: they are closed a second after the kill. When the command exits, whatever it left running in
// its group is killed too: cancelled or finished work is not left running.
//
// The request carries an idempotency key (workflow id, step path and attempt,
// see [IdempotencyKey]) so a service can deduplicate repeated deliveries. exec
// commands also see it in the environment as BEDWE_IDEMPOTENCY_KEY (with
// BEDWE_SERVICE, BEDWE_WORKFLOW_ID, BEDWE_STEP and BEDWE_ATTEMPT), and http
// services in the Idempotency-Key header. A result (exec stdout, http body)
// is limited to [MaxOutput] bytes.
//
// # Files
//
//	doc.go        this overview and the file format
//	parse.go      reading the file: YAML document, top level, errors with positions
//	decl.go       one service declaration: fields per kind, values, command lookup
//	fileerror.go  Error and ErrorList
//	registry.go   Registry, Lookup, patterns, Default, NewRegistry
//	request.go    Request, Service, IdempotencyKey, result checks
//	record.go     the record file: InvocationRecord, ReadRecords
//	bound.go      per-attempt timeout and error classification; Func
//	errors.go     Failure and Timeout
//	exec_unix.go  exec: process groups, pipes, kill on timeout or cancel
//	http.go       http: POST JSON
//	builtin.go    sleep, echo, fail
//	capture.go    bounded stdout buffer and stderr tail
package service
