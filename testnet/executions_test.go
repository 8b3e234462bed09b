package testnet_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/bedwe/bedwe/node/events"
	"github.com/bedwe/bedwe/testnet"
)

// at is a time t0 + ms milliseconds.
func at(ms int) time.Time {
	return time.Date(2026, 11, 23, 10, 0, 0, 0, time.UTC).Add(time.Duration(ms) * time.Millisecond)
}

func inv(ms int, wf, step string, attempt int, once bool) testnet.Invocation {
	return testnet.Invocation{At: at(ms), Workflow: wf, Step: step, Service: "svc" + step, Attempt: attempt, Peer: "12D3KooWpeer", Once: once}
}

func TestCountExecutions(t *testing.T) {
	tests := []struct {
		name      string
		recs      []testnet.Invocation
		evs       []events.Event
		workflows []string
		want      testnet.ExecutionCounts
	}{
		{
			name: "fault-free run",
			recs: []testnet.Invocation{inv(0, "wf-1", "0", 0, false), inv(600, "wf-1", "1", 0, false)},
			evs: []events.Event{
				{At: at(590), Type: events.Accepted, Workflow: "wf-1", Step: "1", After: "0"},
				{At: at(595), Type: events.HandedOn, Workflow: "wf-1", Step: "0"},
				{At: at(1200), Type: events.Completed, Workflow: "wf-1", After: "1"},
			},
			want: testnet.ExecutionCounts{Executions: 2},
		},
		{
			name: "re-run after handed-on is a duplicate",
			recs: []testnet.Invocation{inv(0, "wf-1", "0", 0, false), inv(700, "wf-1", "0", 1, false)},
			evs: []events.Event{
				{At: at(600), Type: events.HandedOn, Workflow: "wf-1", Step: "0"},
				{At: at(690), Type: events.Reroute, Workflow: "wf-1", Step: "0", Attempt: 1},
			},
			want: testnet.ExecutionCounts{Executions: 2, Duplicated: 1, ChainsSuperseded: 1},
		},
		{
			name: "the next holder's accept alone marks the step handed on",
			recs: []testnet.Invocation{inv(0, "wf-1", "0", 0, false), inv(700, "wf-1", "0", 1, false)},
			evs:  []events.Event{{At: at(600), Type: events.Accepted, Workflow: "wf-1", Step: "1", After: "0"}},
			want: testnet.ExecutionCounts{Executions: 2, Duplicated: 1},
		},
		{
			name: "branch end delivered to the join, then re-run",
			recs: []testnet.Invocation{inv(0, "wf-1", "2.0/1", 0, false), inv(900, "wf-1", "2.0/1", 1, false)},
			evs:  []events.Event{{At: at(500), Type: events.Delivery, Workflow: "wf-1", Join: "j", After: "2.0/1"}},
			want: testnet.ExecutionCounts{Executions: 2, Duplicated: 1},
		},
		{
			name: "last step re-run after the completion",
			recs: []testnet.Invocation{inv(0, "wf-1", "4", 0, false), inv(900, "wf-1", "4", 1, false)},
			evs:  []events.Event{{At: at(500), Type: events.Completed, Workflow: "wf-1", After: "4"}},
			want: testnet.ExecutionCounts{Executions: 2, Duplicated: 1},
		},
		{
			name: "holder died before handing on: the re-route is not a duplicate",
			recs: []testnet.Invocation{inv(0, "wf-1", "0", 0, false), inv(1800, "wf-1", "0", 1, false), inv(2500, "wf-1", "1", 0, false)},
			evs: []events.Event{
				{At: at(1700), Type: events.Suspect, Peer: "12D3KooWdead"},
				{At: at(1750), Type: events.Reroute, Workflow: "wf-1", Step: "0", Attempt: 1, Peer: "12D3KooWdead"},
				{At: at(2400), Type: events.Accepted, Workflow: "wf-1", Step: "1", After: "0"},
				{At: at(2410), Type: events.HandedOn, Workflow: "wf-1", Step: "0", Attempt: 1},
			},
			want: testnet.ExecutionCounts{Executions: 3, ChainsSuperseded: 1},
		},
		{
			name: "an at-most-once step run twice is a violation",
			recs: []testnet.Invocation{inv(0, "wf-1", "1", 0, true), inv(1800, "wf-1", "1", 1, true)},
			evs:  []events.Event{{At: at(1750), Type: events.Reroute, Workflow: "wf-1", Step: "1", Attempt: 1}},
			want: testnet.ExecutionCounts{Executions: 2, OnceViolations: 1, ChainsSuperseded: 1},
		},
		{
			name: "three runs of an at-most-once step are two violations",
			recs: []testnet.Invocation{inv(0, "wf-1", "1", 0, true), inv(10, "wf-1", "1", 1, true), inv(20, "wf-1", "1", 2, true), inv(5, "wf-1", "2", 0, true)},
			want: testnet.ExecutionCounts{Executions: 4, OnceViolations: 2},
		},
		{
			name: "an ordinary step run twice is no once violation",
			recs: []testnet.Invocation{inv(0, "wf-1", "1", 0, false), inv(10, "wf-1", "1", 1, false)},
			want: testnet.ExecutionCounts{Executions: 2},
		},
		{
			name: "duplicate and once violation at once",
			recs: []testnet.Invocation{inv(0, "wf-1", "1", 0, true), inv(900, "wf-1", "1", 1, true)},
			evs:  []events.Event{{At: at(400), Type: events.HandedOn, Workflow: "wf-1", Step: "1"}},
			want: testnet.ExecutionCounts{Executions: 2, Duplicated: 1, OnceViolations: 1},
		},
		{
			name: "other workflows are not counted",
			recs: []testnet.Invocation{inv(0, "wf-1", "0", 0, true), inv(0, "wf-2", "0", 0, true), inv(900, "wf-2", "0", 1, true)},
			evs: []events.Event{
				{At: at(400), Type: events.HandedOn, Workflow: "wf-2", Step: "0"},
				{At: at(800), Type: events.Reroute, Workflow: "wf-2", Step: "0", Attempt: 1},
			},
			workflows: []string{"wf-1"},
			want:      testnet.ExecutionCounts{Executions: 1},
		},
		{
			name: "the same step of another workflow handed on is no duplicate",
			recs: []testnet.Invocation{inv(0, "wf-1", "0", 0, false), inv(900, "wf-1", "0", 1, false)},
			evs:  []events.Event{{At: at(400), Type: events.HandedOn, Workflow: "wf-2", Step: "0"}},
			want: testnet.ExecutionCounts{Executions: 2},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := testnet.CountExecutions(tt.recs, tt.evs, tt.workflows)
			if got.Executions != tt.want.Executions || got.Duplicated != tt.want.Duplicated ||
				got.OnceViolations != tt.want.OnceViolations || got.ChainsSuperseded != tt.want.ChainsSuperseded {
				t.Errorf("got executions %d, duplicated %d, once violations %d, chains superseded %d; want %d, %d, %d, %d\ndetails: %v",
					got.Executions, got.Duplicated, got.OnceViolations, got.ChainsSuperseded,
					tt.want.Executions, tt.want.Duplicated, tt.want.OnceViolations, tt.want.ChainsSuperseded, got.Details)
			}
			if n := got.Duplicated + min(got.OnceViolations, 1); len(got.Details) < n {
				t.Errorf("%d details for %d duplicates and %d once violations: %v", len(got.Details), got.Duplicated, got.OnceViolations, got.Details)
			}
		})
	}
}

func TestReadInvocations(t *testing.T) {
	dir := t.TempDir()
	good := `{"at":"2026-11-23T10:00:00.5Z","workflow":"wf-1","step":"2.0/1","service":"sleepD","attempt":1,"key":"wf-1:2.0/1:1","peer":"12D3KooWx","once":true}` + "\n"
	path := filepath.Join(dir, "invocations.jsonl")
	if err := os.WriteFile(path, []byte(good+good+`{"at":"2026-11-23T1`), 0o644); err != nil {
		t.Fatal(err)
	}
	recs, err := testnet.ReadInvocations(path)
	if err != nil {
		t.Fatalf("torn last line: %v", err)
	}
	if len(recs) != 2 || recs[0].Step != "2.0/1" || recs[0].Attempt != 1 || !recs[0].Once || recs[0].At.Nanosecond() != 5e8 {
		t.Fatalf("read %+v", recs)
	}
	if err := os.WriteFile(path, []byte(good+"not json\n"+good), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := testnet.ReadInvocations(path); err == nil || !strings.Contains(err.Error(), ":2:") {
		t.Fatalf("bad middle line: got %v, want an error naming line 2", err)
	}
	recs, err = testnet.ReadInvocations(filepath.Join(dir, "missing.jsonl"))
	if err != nil || len(recs) != 0 {
		t.Fatalf("missing file: %v, %v", recs, err)
	}
}
