package join

import (
	"flag"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/internal/script"
	"github.com/bedwe/bedwe/pack"
)

var update = flag.Bool("update", false, "rewrite the expected output of testdata scripts")

// TestScripts replays every testdata/*.txt script (package
// internal/script): each block is one command, a "----" line, and what the
// machine said to do followed by the copy's state. go test -update
// rewrites them after a deliberate rule change.
func TestScripts(t *testing.T) {
	script.RunAll(t, *update, func(t *testing.T) func(string) []string {
		self := pack.Peer{ID: "self"}
		var j *Join
		return func(cmd string) []string { return apply(t, &j, cmd, self) }
	})
}

func peerArg(v string) *pack.Peer {
	if v == "" || v == "none" {
		return nil
	}
	return &pack.Peer{ID: v}
}

var kinds = map[string]pack.FrameKind{"fork": pack.FrameFork, "first": pack.FrameFirst, "failover": pack.FrameFailover}

// apply runs one command and renders what the machine said and its state.
func apply(t *testing.T, jp **Join, cmd string, self pack.Peer) []string {
	fields := strings.Fields(cmd)
	a := script.Args(fields[1:])
	if fields[0] == "new" {
		rec := Record{ID: "j1", WorkflowID: "wf", Kind: kinds[a["kind"]]}
		for range script.Int(t, a, "branches", 2) {
			rec.Branches = append(rec.Branches, &Body{Text: "S"})
		}
		for i := range script.Int(t, a, "replicas", 2) {
			rec.Replicas = append(rec.Replicas, pack.Peer{ID: "r" + strconv.Itoa(i)})
		}
		if a["split"] != "none" {
			rec.Split = []pack.Settle{{Kind: pack.SettleGuard, Key: "wf|0", Peers: []pack.Peer{{ID: "g"}}}}
		}
		if a["role"] == "replica" {
			primary := New(rec, pack.Peer{ID: "p"})
			*jp = FromReplicaCopy(primary.ReplicaCopy(script.Int(t, a, "rank", 0)))
		} else {
			*jp = New(rec, self)
		}
		return []string{state(*jp)}
	}
	j := *jp
	var ev Event
	switch fields[0] {
	case "deliver", "update":
		d := Deliver{Branch: script.Int(t, a, "branch", 0), Attempt: script.Int(t, a, "attempt", 0), OK: a["ok"] != "false"}
		if !d.OK {
			d.Error = "boom"
		}
		ev = d
		if fields[0] == "update" {
			ev = Update{Deliver: d, From: a["from"]}
		}
	case "actor-silent":
		ev = ActorSilent{Why: "silent"}
	case "earlier":
		ev = EarlierAnswered{Acting: peerArg(a["acting"]), Reached: a["reached"] == "true"}
	case "forward-done":
		ev = ForwardDone{Superseded: a["superseded"] == "true"}
	case "actor-forwarded":
		tok := j.Token()
		tok.Epoch = script.Int(t, a, "epoch", tok.Epoch)
		if v, ok := a["actor"]; ok {
			tok.Actor = v
		}
		ev = ActorForwarded{Token: tok, By: a["by"], Yield: a["yield"]}
	case "handed-over":
		ev = HandedOver{To: pack.Peer{ID: a["to"]}}
	case "take-handover":
		// The actor's latest record: this copy's, as the actor would send it.
		rec := j.Record()
		rec.Role = RoleActing
		ev = TakeHandOver{Record: rec, From: pack.Peer{ID: "p"}}
	case "recovered":
		ev = Recovered{TakenBy: peerArg(a["taken"])}
	case "branch-started":
		tok := j.Token()
		tok.Epoch = script.Int(t, a, "epoch", tok.Epoch)
		if v, ok := a["actor"]; ok {
			tok.Actor = v
		}
		ev = BranchStarted{Branch: script.Int(t, a, "branch", 0), Holder: pack.Peer{ID: a["holder"]}, Attempt: script.Int(t, a, "attempt", 0), Token: tok, Yield: a["yield"]}
	case "split-settled":
		ev = SplitSettled{Superseded: a["superseded"] == "true"}
	case "new-actor":
		ev = NewActor{Actor: pack.Peer{ID: a["actor"]}, Epoch: script.Int(t, a, "epoch", j.Token().Epoch+1)}
	case "branch-ended":
		return []string{fmt.Sprintf("branch-ended: %v", j.BranchEnded(script.Int(t, a, "branch", 0))), state(j)}
	case "restart":
		*jp = Load(j.Record())
		return []string{ready((*jp).Resume()), state(*jp)}
	default:
		t.Fatalf("unknown command %q", fields[0])
	}
	r := j.Step(ev, self)
	return []string{ready(r), state(j)}
}

func ready(r Ready) string {
	var parts []string
	if r.Persist {
		parts = append(parts, "persist")
	}
	if r.Replicate != nil {
		parts = append(parts, "replicate="+result(r.Replicate.Branch, r.Replicate.Attempt, r.Replicate.OK))
	}
	switch {
	case r.Ack.OK:
		parts = append(parts, "ack=ok")
	default:
		parts = append(parts, fmt.Sprintf("ack=refused(%s)", refusalName[r.Ack.Refusal]))
		if r.Ack.TakenBy != "" {
			parts = append(parts, "taken-by="+r.Ack.TakenBy)
		}
	}
	if len(r.Cancel) > 0 {
		parts = append(parts, fmt.Sprintf("cancel=%v", r.Cancel))
	}
	if r.SettleSplit {
		parts = append(parts, "settle-split")
	}
	if len(r.StartBranches) > 0 {
		parts = append(parts, fmt.Sprintf("start=%v", r.StartBranches))
	}
	for _, f := range []struct {
		on   bool
		name string
	}{{r.Forward, "forward"}, {r.NotifyForwarded, "notify-forwarded"}, {r.AskEarlier, "ask-earlier"}, {r.AskReplicas, "ask-replicas"}, {r.Unwatch, "unwatch"}, {r.Watch, "watch"}} {
		if f.on {
			parts = append(parts, f.name)
		}
	}
	if r.TookOver != "" {
		parts = append(parts, "took-over")
	}
	if len(r.Relay) > 0 {
		var ends []string
		for _, d := range r.Relay {
			ends = append(ends, result(d.Branch, d.Attempt, d.OK))
		}
		parts = append(parts, fmt.Sprintf("relay(to=%s %s)", r.RelayTo.ID, strings.Join(ends, " ")))
	}
	return "do: " + strings.Join(parts, " ")
}

var refusalName = map[Refusal]string{RefuseMoved: "moved", RefuseRecovering: "recovering", RefuseNotActing: "not-acting", RefuseSuperseded: "superseded", RefuseTaken: "taken"}

func result(branch, attempt int, ok bool) string {
	s := fmt.Sprintf("b%d@%d:", branch, attempt)
	if ok {
		return s + "ok"
	}
	return s + "fail"
}

func state(j *Join) string {
	rec := j.Record()
	var keys []int
	for k := range rec.Results {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	var res []string
	for _, k := range keys {
		res = append(res, result(k, rec.Results[k].Attempt, rec.Results[k].OK))
	}
	s := fmt.Sprintf("is: %s %s actor=%s results=[%s]", rec.Role, rec.Phase, rec.Actor.ID, strings.Join(res, " "))
	if rec.Epoch > 0 {
		s += fmt.Sprintf(" epoch=%d", rec.Epoch)
	}
	if rec.Phase == PhaseDecided || rec.OK || rec.Error != "" {
		if rec.OK {
			s += fmt.Sprintf(" outcome=ok winners=%v", rec.Winners)
		} else {
			s += " outcome=failed"
		}
	}
	if rec.Kind == pack.FrameFailover {
		s += fmt.Sprintf(" next=%d", rec.Next)
	}
	if len(rec.Started) > 0 {
		var st []string
		for _, k := range sortedKeys(rec.Started) {
			s := rec.Started[k]
			st = append(st, fmt.Sprintf("b%d@%s(by %s#%d)", k, s.Holder.ID, s.Actor, s.Epoch))
		}
		s += " started=[" + strings.Join(st, " ") + "]"
	}
	if rec.SplitSettled {
		s += " split-settled"
	}
	if rec.ForwardedBy != "" {
		s += " forwarded-by=" + rec.ForwardedBy
	}
	if rec.Taken {
		s += " taken"
	}
	return s
}

func sortedKeys(m map[int]Start) []int {
	var keys []int
	for k := range m {
		keys = append(keys, k)
	}
	sort.Ints(keys)
	return keys
}
