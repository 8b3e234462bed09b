package service

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// recordedFile writes a services file holding src into a new directory and
// loads it.
func recordedFile(t *testing.T, src string) (*Registry, string) {
	t.Helper()
	dir := t.TempDir()
	path := filepath.Join(dir, "services.yaml")
	if err := os.WriteFile(path, []byte(src), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := LoadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return r, dir
}

// waitRecord polls the record file until it holds a line with key.
func waitRecord(t *testing.T, path, key string) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for time.Now().Before(deadline) {
		recs, _ := ReadRecords(path)
		for _, rec := range recs {
			if rec.Key == key {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Fatalf("no record for %s within 20s", key)
}

func TestRecordEveryInvocation(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer srv.Close()
	src := fmt.Sprintf(`version: 1
record: calls.jsonl
services:
  E: {kind: echo}
  F: {kind: fail, probability: 1}
  hang: {kind: sleep, duration: 1h}
  slow: {kind: sleep, duration: 1h, timeout: 5ms}
patterns:
  - {match: "exec_*", kind: exec, command: [cat]}
  - {match: "http_*", kind: http, url: %q}
  - {match: "sleep_*", kind: sleep, duration: 1ms}
  - {match: "echo_*", kind: echo}
  - {match: "fail_*", kind: fail, probability: 1}
`, srv.URL)
	r, dir := recordedFile(t, src)
	path := filepath.Join(dir, "calls.jsonl")

	tests := []struct {
		service string
		want    string // ok, failure or timeout
	}{
		{"E", "ok"},
		{"F", "failure"},
		{"slow", "timeout"},
		{"exec_a", "ok"},
		{"http_a", "ok"},
		{"sleep_a", "ok"},
		{"echo_a", "ok"},
		{"fail_a", "failure"},
	}
	const perService = 12
	start := time.Now().UTC()
	want := map[string]InvocationRecord{} // by idempotency key
	var wg sync.WaitGroup
	for _, tt := range tests {
		s, ok := r.Lookup(tt.service)
		if !ok {
			t.Fatalf("%s not offered", tt.service)
		}
		for attempt := 1; attempt <= perService; attempt++ {
			req := Request{
				WorkflowID: "wf-" + tt.service,
				Step:       "3/f1/0",
				Attempt:    attempt,
				Peer:       fmt.Sprintf("12D3KooWpeer%d", attempt%3),
				Attrs:      map[string]string{"once": fmt.Sprint(attempt%2 == 0)},
				Input:      []byte(`{}`),
			}
			req.IdempotencyKey = IdempotencyKey(req.WorkflowID, req.Step, req.Attempt)
			want[req.IdempotencyKey] = InvocationRecord{
				Workflow: req.WorkflowID, Step: req.Step, Service: tt.service, Attempt: attempt,
				Key: req.IdempotencyKey, Peer: req.Peer, Once: attempt%2 == 0,
			}
			wg.Add(1)
			go func() {
				defer wg.Done()
				_, err := s.Invoke(context.Background(), req)
				var f *Failure
				var to *Timeout
				switch {
				case tt.want == "ok" && err != nil,
					tt.want == "failure" && !errors.As(err, &f),
					tt.want == "timeout" && !errors.As(err, &to):
					t.Errorf("%s attempt %d: Invoke error = %v, want %s", tt.service, attempt, err, tt.want)
				}
			}()
		}
	}
	wg.Wait()

	// A sleep cancelled while it runs has been recorded.
	hang, _ := r.Lookup("hang")
	ctx, cancel := context.WithCancel(context.Background())
	req := Request{WorkflowID: "wf-hang", Step: "1", Attempt: 1, IdempotencyKey: "wf-hang:1:1"}
	want[req.IdempotencyKey] = InvocationRecord{Workflow: "wf-hang", Step: "1", Service: "hang", Attempt: 1, Key: req.IdempotencyKey}
	errc := make(chan error, 1)
	go func() {
		_, err := hang.Invoke(ctx, req)
		errc <- err
	}()
	waitRecord(t, path, req.IdempotencyKey)
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled sleep: Invoke error = %v, want context.Canceled", err)
	}
	// An attempt whose context is already done runs nothing and is not
	// recorded.
	if _, err := hang.Invoke(ctx, Request{IdempotencyKey: "not-run"}); !errors.Is(err, context.Canceled) {
		t.Errorf("Invoke with a cancelled context = %v", err)
	}
	end := time.Now().UTC()

	recs, err := ReadRecords(path)
	if err != nil {
		t.Fatal(err)
	}
	if len(recs) != len(want) {
		t.Errorf("%d records, want one per invocation: %d", len(recs), len(want))
	}
	seen := map[string]bool{}
	for _, rec := range recs {
		if seen[rec.Key] {
			t.Errorf("%s recorded twice", rec.Key)
		}
		seen[rec.Key] = true
		if rec.At.Before(start) || rec.At.After(end) || rec.At.Location() != time.UTC {
			t.Errorf("%s: at = %v, want a UTC time between %v and %v", rec.Key, rec.At, start, end)
		}
		w, ok := want[rec.Key]
		w.At = rec.At
		if !ok || rec != w {
			t.Errorf("record %+v, want %+v", rec, w)
		}
	}
}

func TestRecordLineFormat(t *testing.T) {
	t.Parallel()
	r, dir := recordedFile(t, "version: 1\nrecord: calls.jsonl\nservices:\n  E: {kind: echo}\n")
	s, _ := r.Lookup("E")
	req := Request{WorkflowID: "wf", Step: "2", Attempt: 3, IdempotencyKey: "wf:2:3", Peer: "12D3KooWx", Attrs: map[string]string{"once": "true"}}
	if _, err := s.Invoke(context.Background(), req); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "calls.jsonl"))
	if err != nil {
		t.Fatal(err)
	}
	line := string(data)
	_, rest, ok := strings.Cut(line, `","workflow"`)
	want := `:"wf","step":"2","service":"E","attempt":3,"key":"wf:2:3","peer":"12D3KooWx","once":true}` + "\n"
	if !strings.HasPrefix(line, `{"at":"`) || !ok || rest != want {
		t.Errorf("record line = %q, want {\"at\":\"...\",\"workflow\"%s", line, want)
	}
}

func TestRecordPath(t *testing.T) {
	t.Parallel()
	cwd, err := os.Getwd()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	abs := filepath.Join(t.TempDir(), "abs.jsonl")
	tests := []struct {
		name   string
		record string
		load   bool // LoadFile from dir, else Parse
		want   string
	}{
		{"LoadFile relative", "calls.jsonl", true, filepath.Join(dir, "calls.jsonl")},
		{"LoadFile relative subdir", "./sub/../calls2.jsonl", true, filepath.Join(dir, "calls2.jsonl")},
		{"LoadFile absolute", abs, true, abs},
		{"Parse relative", "calls.jsonl", false, filepath.Join(cwd, "calls.jsonl")},
		{"Parse absolute", abs, false, abs},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := fmt.Sprintf("version: 1\nrecord: %q\nservices:\n  E: {kind: echo}\n", tt.record)
			var r *Registry
			var err error
			if tt.load {
				file := filepath.Join(dir, strings.ReplaceAll(tt.name, " ", "_")+".yaml")
				if err := os.WriteFile(file, []byte(src), 0o644); err != nil {
					t.Fatal(err)
				}
				r, err = LoadFile(file)
			} else {
				r, err = Parse([]byte(src))
			}
			if err != nil {
				t.Fatal(err)
			}
			if r.rec == nil || r.rec.path != tt.want {
				t.Fatalf("record file = %+v, want %s", r.rec, tt.want)
			}
			if !tt.load {
				return // do not write into the package directory
			}
			s, _ := r.Lookup("E")
			if _, err := s.Invoke(context.Background(), Request{Step: "1"}); err != nil {
				t.Fatal(err)
			}
			if recs, err := ReadRecords(tt.want); err != nil || len(recs) == 0 {
				t.Errorf("ReadRecords(%s) = %v, %v; want the invocation", tt.want, recs, err)
			}
		})
	}
}

func TestRecordUnwritable(t *testing.T) {
	t.Parallel()
	dir := t.TempDir()
	tests := []struct {
		name   string
		record string
		want   string
	}{
		{"directory", dir, "is a directory"},
		{"missing directory", filepath.Join(dir, "missing", "calls.jsonl"), "no such file or directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			marker := filepath.Join(t.TempDir(), "ran")
			src := fmt.Sprintf("version: 1\nrecord: %q\npatterns:\n  - {match: \"*\", kind: exec, command: [/bin/sh, -c, 'touch %s; cat']}\n", tt.record, marker)
			r, err := Parse([]byte(src))
			if err != nil {
				t.Fatal(err)
			}
			s, _ := r.Lookup("mProject_1")
			for range 2 { // a failed open is tried again, and fails again
				_, err = s.Invoke(context.Background(), testRequest())
				var f *Failure
				msg := fmt.Sprintf(`service "mProject_1" failed: record file %q cannot be written (%s), so the service was not run`, tt.record, tt.want)
				if !errors.As(err, &f) || err.Error() != msg {
					t.Errorf("Invoke error = %v, want a Failure %q", err, msg)
				}
			}
			if _, err := os.Stat(marker); !errors.Is(err, os.ErrNotExist) {
				t.Error("the service ran although it could not be recorded")
			}
		})
	}
}

func TestReadRecords(t *testing.T) {
	t.Parallel()
	line := func(key string) string {
		return `{"at":"2025-01-02T03:04:05.123456789Z","workflow":"wf","step":"1","service":"S1","attempt":1,"key":"` + key + `","peer":"p","once":false}` + "\n"
	}
	tests := []struct {
		name string
		data string
		keys []string
		err  string // error substring; "" = none
	}{
		{"empty", "", nil, ""},
		{"two lines", line("a") + line("b"), []string{"a", "b"}, ""},
		{"torn last line", line("a") + line("b")[:40], []string{"a"}, ""},
		{"last line without newline", line("a") + strings.TrimSuffix(line("b"), "\n"), []string{"a", "b"}, ""},
		{"bad middle line", line("a") + "{oops\n" + line("b"), nil, ":2: invalid character"},
		{"blank line", line("a") + "\n" + line("b"), []string{"a", "b"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "calls.jsonl")
			if err := os.WriteFile(path, []byte(tt.data), 0o644); err != nil {
				t.Fatal(err)
			}
			recs, err := ReadRecords(path)
			if tt.err != "" {
				if err == nil || !strings.Contains(err.Error(), path+tt.err) {
					t.Fatalf("ReadRecords error = %v, want it to contain %q", err, path+tt.err)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, rec := range recs {
				keys = append(keys, rec.Key)
			}
			if fmt.Sprint(keys) != fmt.Sprint(tt.keys) {
				t.Errorf("keys = %q, want %q", keys, tt.keys)
			}
			if len(recs) > 0 && recs[0].At.Nanosecond() != 123456789 {
				t.Errorf("at = %v, want nanoseconds kept", recs[0].At)
			}
		})
	}
	if _, err := ReadRecords(filepath.Join(t.TempDir(), "missing")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("ReadRecords(missing) = %v, want os.ErrNotExist", err)
	}
}
