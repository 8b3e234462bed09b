package main

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/api"
	"github.com/bedwe/bedwe/pack"
)

// TestProgressCounterNumbersEachStep: two steps that finish between two
// polls get consecutive numbers ([4/10] S7, [5/10] S3), a failed attempt
// keeps the count, and nothing is printed twice.
func TestProgressCounterNumbersEachStep(t *testing.T) {
	t0 := time.Date(2026, 11, 23, 12, 0, 0, 0, time.UTC)
	step := func(path, svc string, outcome pack.Outcome, i int) pack.TraceEntry {
		return pack.TraceEntry{Path: path, Service: svc, Outcome: outcome, Peer: "p", Start: t0.Add(time.Duration(i) * time.Second)}
	}
	var recent []pack.TraceEntry
	var p progressCounter
	var got []string
	poll := func(done int, add ...pack.TraceEntry) {
		recent = append(recent, add...)
		for _, a := range p.fresh(api.Status{StepsDone: done, StepsTotal: 10, Recent: slices.Clone(recent)}) {
			got = append(got, fmt.Sprintf("[%d/10] %s %s", a.Done, a.Entry.Service, a.Entry.Outcome))
		}
	}
	poll(3, step("0", "S1", pack.OutcomeOK, 0), step("1", "S2", pack.OutcomeOK, 1), step("2", "S3a", pack.OutcomeOK, 2))
	poll(5, step("3/0", "S7", pack.OutcomeOK, 3), step("3/1", "S3", pack.OutcomeOK, 4))
	poll(5, step("3/2", "S4", pack.OutcomeFailed, 5))
	poll(5) // nothing new
	poll(6, step("3/2", "S4", pack.OutcomeOK, 6))
	want := []string{
		"[1/10] S1 ok", "[2/10] S2 ok", "[3/10] S3a ok",
		"[4/10] S7 ok", "[5/10] S3 ok",
		"[5/10] S4 failed",
		"[6/10] S4 ok",
	}
	if !slices.Equal(got, want) {
		t.Errorf("progress lines\n got %q\nwant %q", got, want)
	}
}
