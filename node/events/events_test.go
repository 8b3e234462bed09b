package events

import (
	"os"
	"path/filepath"
	"sync"
	"testing"
)

func TestEmitAndRead(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	a, err := Open(path, "peerA")
	if err != nil {
		t.Fatal(err)
	}
	b, err := Open(path, "peerB")
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l := a
			if i%2 == 1 {
				l = b
			}
			l.Emit(Event{Type: Reroute, Workflow: "wf-1", Step: "2", Attempt: i})
		}()
	}
	wg.Wait()
	var nilLog *Log
	nilLog.Emit(Event{Type: Suspect}) // must not panic
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 200 {
		t.Fatalf("read %d events, want 200", len(got))
	}
	seen := map[int]bool{}
	nodes := map[string]int{}
	for _, e := range got {
		if e.Type != Reroute || e.Workflow != "wf-1" || e.At.IsZero() {
			t.Fatalf("bad event %+v", e)
		}
		seen[e.Attempt] = true
		nodes[e.Node]++
	}
	if len(seen) != 200 || nodes["peerA"] != 100 || nodes["peerB"] != 100 {
		t.Fatalf("attempts seen %d, per node %v", len(seen), nodes)
	}
}

func TestReadSkipsTornLastLine(t *testing.T) {
	path := filepath.Join(t.TempDir(), "events.jsonl")
	data := `{"at":"2026-11-23T10:00:00Z","type":"suspect","peer":"x"}` + "\n" + `{"at":"2026-11-23T10:00:01Z","ty`
	if err := os.WriteFile(path, []byte(data), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Peer != "x" {
		t.Fatalf("got %+v", got)
	}
	// A bad line in the middle is an error with its line number.
	bad := `{"type":"suspect"}` + "\n" + `nonsense` + "\n" + `{"type":"suspect"}` + "\n"
	if err := os.WriteFile(path, []byte(bad), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Read(path); err == nil {
		t.Fatal("a bad middle line was not reported")
	}
}

// TestObserverSeesEveryEvent: a Log made by New passes each event, stamped,
// to its observer, with or without a file, and writes the same events.
func TestObserverSeesEveryEvent(t *testing.T) {
	var mu sync.Mutex
	var seen []Event
	observe := func(e Event) {
		mu.Lock()
		seen = append(seen, e)
		mu.Unlock()
	}
	noFile, err := New("", "peerA", observe)
	if err != nil {
		t.Fatal(err)
	}
	noFile.Emit(Event{Type: StepRun, Step: "1", Outcome: OutcomeOK, Seconds: 0.25})
	if err := noFile.Close(); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "events.jsonl")
	withFile, err := New(path, "peerB", observe)
	if err != nil {
		t.Fatal(err)
	}
	withFile.Emit(Event{Type: Handoff, Step: "2", To: "peerC", Outcome: OutcomeRefused, Reason: "draining"})
	if err := withFile.Close(); err != nil {
		t.Fatal(err)
	}
	if len(seen) != 2 || seen[0].Node != "peerA" || seen[0].At.IsZero() || seen[1].Node != "peerB" || seen[1].Outcome != OutcomeRefused {
		t.Fatalf("observer saw %+v", seen)
	}
	got, err := Read(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0].Type != Handoff || got[0].Outcome != OutcomeRefused || got[0].To != "peerC" {
		t.Fatalf("file holds %+v, want the one hand-off event", got)
	}
	if _, err := os.Stat(path); err != nil {
		t.Fatal(err)
	}
}
