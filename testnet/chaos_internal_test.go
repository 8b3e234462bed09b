package testnet

import (
	"encoding/json"
	"path/filepath"
	"strings"
	"testing"

	"github.com/bedwe/bedwe/node/service"
)

func TestWithRecord(t *testing.T) {
	dir := t.TempDir()
	text, path := withRecord("version: 1\npatterns:\n  - {match: \"*\", kind: echo}\n", dir)
	if path != filepath.Join(dir, RecordFile) || !strings.Contains(text, "\nrecord: "+RecordFile+"\n") {
		t.Fatalf("added: path %q, text:\n%s", path, text)
	}
	if _, err := service.Parse([]byte(text)); err != nil {
		t.Fatalf("the services text with a record field does not parse: %v", err)
	}
	own := "version: 1\nrecord: /elsewhere/calls.jsonl\n"
	if text, path := withRecord(own, dir); text != own || path != "/elsewhere/calls.jsonl" {
		t.Fatalf("own record: path %q, text %q", path, text)
	}
	if text, path := withRecord("version: 1\nrecord: calls.jsonl\n", dir); path != filepath.Join(dir, "calls.jsonl") || strings.Count(text, "record:") != 1 {
		t.Fatalf("relative own record: path %q, text %q", path, text)
	}
	if text, path := withRecord(DefaultServices, dir); text != DefaultServices || path != filepath.Join(dir, RecordFile) {
		t.Fatalf("DefaultServices: path %q, text changed: %v", path, text != DefaultServices)
	}
	flow := "{version: 1}"
	if text, path := withRecord(flow, dir); text != flow || path != "" {
		t.Fatalf("flow mapping: path %q, text %q", path, text)
	}
}

func TestNormalResult(t *testing.T) {
	echo := func(wf string, attempt int) json.RawMessage {
		b, _ := json.Marshal(map[string]any{
			"echo":    map[string]any{"workflow_id": wf, "step": "1", "service": "oneB", "attempt": attempt, "idempotency_key": wf + ":1:" + string(rune('0'+attempt)), "input": map[string]any{"sleep_ms": 500}},
			"outputs": []string{"sleepA"},
		})
		return b
	}
	base := map[string]json.RawMessage{"sleepA": json.RawMessage(`{"slept_ms":500}`), "oneB": echo("wf-a", 0)}
	want, ok := normalResult(base, "wf-a")
	if !ok {
		t.Fatal("fault-free result rejected")
	}
	rerouted := map[string]json.RawMessage{"sleepA": json.RawMessage(`{ "slept_ms": 500 }`), "oneB": echo("wf-b", 2)}
	if got, ok := normalResult(rerouted, "wf-b"); !ok || len(got) != len(want) || got["oneB"] != want["oneB"] || got["sleepA"] != want["sleepA"] {
		t.Fatalf("a re-routed run's result differs: %v vs %v", got, want)
	}
	if _, ok := normalResult(rerouted, "wf-c"); ok {
		t.Fatal("an echo naming another workflow was accepted")
	}
	short := map[string]json.RawMessage{"sleepA": json.RawMessage(`{"slept_ms":499}`), "oneB": echo("wf-b", 0)}
	if got, _ := normalResult(short, "wf-b"); got["sleepA"] == want["sleepA"] {
		t.Fatal("a different sleep output compared equal")
	}
}
