package main

import (
	"fmt"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// progressCounter numbers the step attempts that submit --wait and the demo
// print as they poll a workflow's status. Each successful attempt gets its
// own count of successful attempts so far, so two steps that finish between
// two polls print [4/10] and [5/10], not [5/10] twice; a failed attempt
// shows the count it did not advance.
type progressCounter struct {
	seen map[string]bool
}

// numberedAttempt is one attempt to print and its count.
type numberedAttempt struct {
	Done  int
	Entry pack.TraceEntry
}

// fresh returns the attempts of s.Recent not returned before, oldest first,
// numbered so that the last successful one has s.StepsDone (the origin
// counts successful attempts as their events arrive, in Recent's order).
func (p *progressCounter) fresh(s api.Status) []numberedAttempt {
	if p.seen == nil {
		p.seen = map[string]bool{}
	}
	var out []numberedAttempt
	ok := 0
	for _, e := range s.Recent {
		key := fmt.Sprintf("%s/%d/%s/%s/%s", e.Path, e.Attempt, e.Peer, e.Start, e.Outcome)
		if p.seen[key] {
			continue
		}
		p.seen[key] = true
		out = append(out, numberedAttempt{Entry: e})
		if e.Outcome == pack.OutcomeOK {
			ok++
		}
	}
	n := max(s.StepsDone-ok, 0)
	for i := range out {
		if out[i].Entry.Outcome == pack.OutcomeOK {
			n++
		}
		out[i].Done = n
	}
	return out
}
