package testnet

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"slices"
	"sort"
	"time"

	"github.com/bedwe/bedwe/internal/jsonl"
	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/node/service"
)

// Invocation is one line of an invocation record file (a services file's
// record field): one service execution that started, written before the
// service ran (see node/service).
type Invocation = service.InvocationRecord

// ReadInvocations reads an invocation record file, in file order. A file
// that does not exist holds no records (nothing ran yet). A last line
// without its newline that does not parse (a writer killed mid-write) is
// skipped; any other line that does not parse is an error naming it.
func ReadInvocations(path string) ([]Invocation, error) {
	recs, err := jsonl.Read[Invocation](path)
	if errors.Is(err, os.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return recs, fmt.Errorf("read invocation records: %w", err)
	}
	return recs, nil
}

// ExecutionCounts is what the invocation records and the nodes' events say
// ran, as opposed to what the results report.
type ExecutionCounts struct {
	// Executions is the number of invocation records of the workflows.
	Executions int `json:"executions"`
	// Duplicated counts invocations of a (workflow, step) that started
	// after that step had finished and been handed on. A step is handed on
	// at the earliest of: a handed-on event for it; an accepted, delivery
	// or completed event of its workflow whose after is the step. A step
	// run again because its holder died before handing it on is not
	// counted: that is the at-least-once re-route working.
	Duplicated int `json:"executions_duplicated"`
	// OnceViolations counts, for each (workflow, step) whose records say
	// once=true, the invocations beyond the first.
	OnceViolations int `json:"once_violations"`
	// ChainsSuperseded is the number of reroute events of the workflows.
	ChainsSuperseded int `json:"chains_superseded"`
	// JoinTakeovers is the number of join-takeover events of the
	// workflows (a join copy started acting in another's place).
	JoinTakeovers int `json:"join_takeovers"`
	// Stashes is the number of stashed events with outcome ok of the
	// workflows (a holder dropped outputs from its pack after the origin
	// copies stored them).
	Stashes int `json:"stashes,omitempty"`
	// StashesKept is the number of stashed events with another outcome (an
	// origin copy did not store the outputs: the holder kept them).
	StashesKept int `json:"stashes_kept,omitempty"`
	// Details describes the duplicated executions and once violations (at
	// most maxDetails lines).
	Details []string `json:"details,omitempty"`
}

// maxDetails bounds ExecutionCounts.Details.
const maxDetails = 20

// stepKey names one step of one workflow.
type stepKey struct{ workflow, step string }

// CountExecutions counts executions, duplicated executions, at-most-once
// violations and superseded chains of the given workflows (nil: every
// workflow) from invocation records and node events (see ExecutionCounts
// for the definitions).
func CountExecutions(recs []Invocation, evs []events.Event, workflows []string) ExecutionCounts {
	var c ExecutionCounts
	want := func(string) bool { return true }
	if workflows != nil {
		set := map[string]bool{}
		for _, w := range workflows {
			set[w] = true
		}
		want = func(w string) bool { return set[w] }
	}
	detail := func(format string, args ...any) {
		if len(c.Details) < maxDetails {
			c.Details = append(c.Details, fmt.Sprintf(format, args...))
		}
	}
	handed := map[stepKey]time.Time{}
	handedBy := map[stepKey]string{}
	handOn := func(k stepKey, e events.Event) {
		if k.step == "" || e.At.IsZero() {
			return
		}
		if t, ok := handed[k]; !ok || e.At.Before(t) {
			handed[k] = e.At
			handedBy[k] = e.Type
		}
	}
	for _, e := range evs {
		if !want(e.Workflow) {
			continue
		}
		switch e.Type {
		case events.HandedOn:
			handOn(stepKey{e.Workflow, e.Step}, e)
		case events.Accepted, events.Delivery, events.Completed:
			handOn(stepKey{e.Workflow, e.After}, e)
		case events.Reroute:
			c.ChainsSuperseded++
		case events.JoinTakeover:
			c.JoinTakeovers++
		case events.Stashed:
			if e.Outcome == events.OutcomeOK {
				c.Stashes++
			} else {
				c.StashesKept++
			}
		}
	}
	var mine []Invocation
	for _, r := range recs {
		if want(r.Workflow) {
			mine = append(mine, r)
		}
	}
	// Start order decides which invocation of a once step was the first.
	sort.SliceStable(mine, func(i, j int) bool { return mine[i].At.Before(mine[j].At) })
	c.Executions = len(mine)
	runs := map[stepKey][]Invocation{}
	var order []stepKey
	for _, r := range mine {
		k := stepKey{r.Workflow, r.Step}
		if _, seen := runs[k]; !seen {
			order = append(order, k)
		}
		runs[k] = append(runs[k], r)
		if t, ok := handed[k]; ok && r.At.After(t) {
			c.Duplicated++
			detail("duplicated: %s step %s (%s) attempt %d started on %s %s after it was handed on (%s)",
				r.Workflow, r.Step, r.Service, r.Attempt, shortPeer(r.Peer), r.At.Sub(t).Round(time.Millisecond), handedBy[k])
		}
	}
	for _, k := range order {
		rs := runs[k]
		if len(rs) < 2 || !slices.ContainsFunc(rs, func(r Invocation) bool { return r.Once }) {
			continue
		}
		c.OnceViolations += len(rs) - 1
		attempts := make([]string, len(rs))
		for i, r := range rs {
			attempts[i] = fmt.Sprintf("attempt %d on %s", r.Attempt, shortPeer(r.Peer))
		}
		detail("at-most-once: %s step %s (%s) ran %d times: %v", k.workflow, k.step, rs[0].Service, len(rs), attempts)
	}
	return c
}

// eventTail reads the testnet's events files incrementally, from where they
// were when it was made, and keeps every event it has read.
type eventTail struct {
	files *lineTail
	// all is every event read so far, file by file in read order.
	all []events.Event
	// bad counts complete lines that did not parse.
	bad int
}

// newEventTail starts tailing every node's events file at its current end.
func newEventTail(m *Manifest) *eventTail {
	var paths []string
	for i := range m.Nodes {
		paths = append(paths, m.Nodes[i].Events())
	}
	return &eventTail{files: newLineTail(paths)}
}

// poll reads what every events file gained since the last poll and returns
// the new events (complete lines only; a partial line waits for its end).
func (t *eventTail) poll() []events.Event {
	var fresh []events.Event
	for i := range t.files.paths {
		t.files.lines(i, func(line []byte) {
			if len(bytes.TrimSpace(line)) == 0 {
				return
			}
			var e events.Event
			if err := json.Unmarshal(line, &e); err != nil {
				t.bad++
				return
			}
			fresh = append(fresh, e)
		})
	}
	t.all = append(t.all, fresh...)
	return fresh
}

// shortPeer is how node logs abbreviate a peer ID (rpc.ShortID).
func shortPeer(id string) string {
	if len(id) <= 12 {
		return id
	}
	return id[len(id)-8:]
}
