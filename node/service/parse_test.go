package service

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLoadFileExamples(t *testing.T) {
	tests := []struct {
		file     string
		names    []string
		patterns []string
		kinds    map[string]string        // service name -> kind Lookup gives
		expect   map[string]time.Duration // service name -> Expect()
	}{
		{
			file:     "services.yaml",
			names:    []string{"S1", "S2", "flaky", "mirror", "notify", "stamp"},
			patterns: []string{"S*"},
			kinds: map[string]string{
				"mirror": KindExec, "stamp": KindExec, "notify": KindHTTP,
				"S1": KindSleep, "S2": KindEcho, "flaky": KindFail, "S3": KindSleep,
			},
			expect: map[string]time.Duration{
				"mirror": time.Second,      // declared
				"stamp":  10 * time.Second, // defaults to timeout
				"notify": 5 * time.Second,
				"S1":     50 * time.Millisecond, // defaults to duration
				"S3":     10 * time.Millisecond, // from the pattern
				"S2":     0,
			},
		},
		{
			file:     "testnet.yaml",
			names:    []string{},
			patterns: []string{"flaky*", "*"},
			kinds:    map[string]string{"flaky_3": KindFail, "mProject_ID0000001": KindSleep},
		},
		{
			file:     "wfcommons.yaml",
			names:    []string{},
			patterns: []string{"*"},
			kinds:    map[string]string{"mProject_ID0000001": KindSleep},
			expect:   map[string]time.Duration{"x": 10 * time.Millisecond},
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r, err := LoadFile(filepath.Join("testdata", tt.file))
			if err != nil {
				t.Fatal(err)
			}
			if got := r.Names(); !slices.Equal(got, tt.names) {
				t.Errorf("Names() = %q, want %q", got, tt.names)
			}
			if got := r.Patterns(); !slices.Equal(got, tt.patterns) {
				t.Errorf("Patterns() = %q, want %q", got, tt.patterns)
			}
			for name, kind := range tt.kinds {
				s, ok := r.Lookup(name)
				if !ok {
					t.Errorf("Lookup(%q) not found", name)
					continue
				}
				if s.Kind() != kind {
					t.Errorf("Lookup(%q).Kind() = %q, want %q", name, s.Kind(), kind)
				}
			}
			for name, want := range tt.expect {
				s, _ := r.Lookup(name)
				if got := s.Expect(); got != want {
					t.Errorf("Lookup(%q).Expect() = %v, want %v", name, got, want)
				}
			}
		})
	}
}

func TestParseEmptyRegistry(t *testing.T) {
	r, err := Parse([]byte("version: 1\n"))
	if err != nil {
		t.Fatal(err)
	}
	if len(r.Names()) != 0 || len(r.Patterns()) != 0 || r.Offers("S1") {
		t.Errorf("empty file offers something: names %q patterns %q", r.Names(), r.Patterns())
	}
}

func TestParseCommandResolution(t *testing.T) {
	dir := t.TempDir()
	notExec := filepath.Join(dir, "notexec")
	if err := os.WriteFile(notExec, []byte("#!/bin/sh\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name    string
		command string
		want    string // error substring; "" = ok
	}{
		{"absolute", `["/bin/sh", "-c", "true"]`, ""},
		{"bare name in PATH", `[sh]`, ""},
		{"string form", `/bin/sh`, ""},
		{"absolute missing", `["/nonexistent/bedwe-tool"]`, `command "/nonexistent/bedwe-tool" (an absolute path) does not exist`},
		{"absolute directory", `["` + dir + `"]`, "is a directory"},
		{"absolute not executable", `["` + notExec + `"]`, "is not executable"},
		{"relative path", `["./tool"]`, `command "./tool" is a relative path; use an absolute path or a bare name found in PATH`},
		{"bare name missing", `[bedwe-no-such-tool]`, `command "bedwe-no-such-tool" (a bare name) was not found in PATH=`},
		{"empty list", `[]`, "want a program and its arguments"},
		{"mapping", `{a: b}`, "want a list like"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			src := "version: 1\nservices:\n  x: {kind: exec, command: " + tt.command + "}\n"
			r, err := Parse([]byte(src))
			if tt.want == "" {
				if err != nil {
					t.Fatalf("Parse: %v", err)
				}
				s, _ := r.Lookup("x")
				path := s.(*bound).r.(*execRunner).path
				if !filepath.IsAbs(path) {
					t.Errorf("command resolved to %q, want an absolute path", path)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Fatalf("Parse error = %v, want it to contain %q", err, tt.want)
			}
			if !strings.HasPrefix(err.Error(), "line 3:") {
				t.Errorf("error %q does not start with its position line 3", err)
			}
		})
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		name string
		src  string
		want []string // each must appear in the error text
	}{
		{"empty", "", []string{"empty services file"}},
		{"comment only", "# nothing\n", []string{"empty services file"}},
		{"not a mapping", "- a\n- b\n", []string{"line 1:1: want a mapping with version, services and patterns, got a list"}},
		{"missing version", "services: {}\n", []string{"version: missing"}},
		{"version 2", "version: 2\n", []string{`line 1:10: version: version 2 is not supported; this bedwe reads version 1`}},
		{"version string", "version: one\n", []string{`want the number 1, got "one"`}},
		{"unknown top field", "version: 1\nservice: {}\n", []string{"line 2:1: service: unknown field (want version, services, patterns or record)"}},
		{"yaml syntax", "version: 1\nservices:\n  a: b\n   c: d\n", []string{"line 4: YAML syntax: mapping values are not allowed in this context"}},
		{"two documents", "version: 1\n---\nversion: 1\n", []string{"second YAML document"}},
		{"duplicate key", "version: 1\nservices:\n  a: {kind: echo}\n  a: {kind: echo}\n", []string{"line 4:3: services.a: appears twice"}},
		{"services a list", "version: 1\nservices: [a]\n", []string{"want a mapping of service name"}},
		{"entry not a mapping", "version: 1\nservices:\n  a: echo\n", []string{`line 3:6: services.a: want a mapping like {kind: sleep, duration: 10ms}, got "echo"`}},
		{"max_concurrent zero", "version: 1\nservices:\n  a: {kind: echo, max_concurrent: 0}\n", []string{"line 3:35: services.a.max_concurrent: want a whole number of concurrent executions from 1 to 65536, got 0"}},
		{"max_concurrent text", "version: 1\nservices:\n  a: {kind: echo, max_concurrent: two}\n", []string{"services.a.max_concurrent: want an integer"}},
		{"missing kind", "version: 1\nservices:\n  a: {duration: 1s}\n", []string{"services.a.kind: missing (want exec, http, sleep, echo or fail)"}},
		{"unknown kind", "version: 1\nservices:\n  a: {kind: python}\n", []string{`line 3:13: services.a.kind: unknown kind "python" (want exec, http, sleep, echo or fail)`}},
		{"unknown field", "version: 1\nservices:\n  a: {kind: sleep, duration: 1s, colour: red}\n", []string{
			"line 3:34: services.a.colour: unknown field for kind sleep (allowed: duration, expect, field, from_request, kind, max, max_concurrent, scale, timeout)"}},
		{"field of another kind", "version: 1\nservices:\n  a: {kind: sleep, duration: 1s, url: x}\n", []string{
			"services.a.url: unknown field for kind sleep; it belongs to kind http"}},
		{"match outside patterns", "version: 1\nservices:\n  a: {kind: echo, match: x}\n", []string{"services.a.match: unknown field for kind echo"}},
		{"bad service name", "version: 1\nservices:\n  a b: {kind: echo}\n", []string{`line 3:3: services.a b: service name may hold only letters, digits, '_', '-' and '.', found ' '`}},
		{"keyword name", "version: 1\nservices:\n  FORK: {kind: echo}\n", []string{"services.FORK: service name is a reserved keyword"}},
		{"bad duration", "version: 1\nservices:\n  a: {kind: sleep, duration: soon}\n", []string{`line 3:30: services.a.duration: want a duration like 30s or 1m30s, got "soon"`}},
		{"duration without unit", "version: 1\nservices:\n  a: {kind: sleep, duration: 30}\n", []string{"want a duration with a unit, like 30s, got 30"}},
		{"negative timeout", "version: 1\nservices:\n  a: {kind: echo, timeout: -1s}\n", []string{"services.a.timeout: want a duration greater than 0"}},
		{"sleep without duration", "version: 1\nservices:\n  a: {kind: sleep}\n", []string{"services.a.duration: missing: want a duration like 50ms, or from_request: true"}},
		{"field without from_request", "version: 1\nservices:\n  a: {kind: sleep, duration: 1s, scale: 2}\n", []string{"field, scale and max apply only with from_request: true"}},
		{"from_request not bool", "version: 1\nservices:\n  a: {kind: sleep, from_request: yes please}\n", []string{"services.a.from_request: want true or false"}},
		{"scale zero", "version: 1\nservices:\n  a: {kind: sleep, from_request: true, scale: 0}\n", []string{"services.a.scale: want a number greater than 0, got 0"}},
		{"exec without command", "version: 1\nservices:\n  a: {kind: exec}\n", []string{"services.a.command: missing"}},
		{"exec relative dir", "version: 1\nservices:\n  a: {kind: exec, command: [sh], dir: tmp}\n", []string{`services.a.dir: want an absolute path, got "tmp"`}},
		{"exec missing dir", "version: 1\nservices:\n  a: {kind: exec, command: [sh], dir: /nonexistent/bedwe}\n", []string{"is not an existing directory"}},
		{"exec env not a map", "version: 1\nservices:\n  a: {kind: exec, command: [sh], env: [A]}\n", []string{"services.a.env: want a mapping of variable to value"}},
		{"exec env bad name", "version: 1\nservices:\n  a: {kind: exec, command: [sh], env: {\"A=B\": c}}\n", []string{"cannot contain '='"}},
		{"http without url", "version: 1\nservices:\n  a: {kind: http}\n", []string{"services.a.url: missing"}},
		{"http bad url", "version: 1\nservices:\n  a: {kind: http, url: \"ftp://x/y\"}\n", []string{`services.a.url: want an absolute http:// or https:// URL, got "ftp://x/y"`}},
		{"http reserved header", "version: 1\nservices:\n  a: {kind: http, url: \"http://x/\", headers: {content-type: text/plain}}\n", []string{"services.a.headers.content-type: set by bedwe"}},
		{"http bad header", "version: 1\nservices:\n  a: {kind: http, url: \"http://x/\", headers: {\"a b\": c}}\n", []string{"not a valid HTTP header name"}},
		{"fail without probability", "version: 1\nservices:\n  a: {kind: fail}\n", []string{"services.a.probability: missing"}},
		{"fail probability too big", "version: 1\nservices:\n  a: {kind: fail, probability: 1.5}\n", []string{"services.a.probability: want a number from 0 to 1, got 1.5"}},
		{"fail seed not int", "version: 1\nservices:\n  a: {kind: fail, probability: 0.5, seed: 1.5}\n", []string{"services.a.seed: want an integer, got 1.5"}},
		{"patterns a mapping", "version: 1\npatterns: {a: b}\n", []string{"patterns: want a list of {match: GLOB, kind: ...}"}},
		{"pattern without match", "version: 1\npatterns:\n  - {kind: echo}\n", []string{"line 3:5: patterns[0].match: missing"}},
		{"pattern bad glob", "version: 1\npatterns:\n  - {match: \"S[\", kind: echo}\n", []string{`patterns[0].match: want a glob over service names`}},
		{"pattern unknown field", "version: 1\npatterns:\n  - {match: \"*\", kind: echo, foo: 1}\n", []string{"patterns[0].foo: unknown field for kind echo (allowed: expect, kind, match, max_concurrent, timeout)"}},
		{"record empty", "version: 1\nrecord: \"\"\n", []string{`line 2:9: record: want the path of a file to append invocation records to, got ""`}},
		{"record a list", "version: 1\nrecord: [a.jsonl]\n", []string{"line 2:9: record: want the path of a file to append invocation records to, got a list"}},
		{"record a number", "version: 1\nrecord: 5\n", []string{"line 2:9: record: want the path of a file to append invocation records to, got 5"}},
		{"record null", "version: 1\nrecord:\nservices: {}\n", []string{"line 2:8: record: want the path of a file to append invocation records to, got nothing"}},
		{"record twice", "version: 1\nrecord: a\nrecord: b\n", []string{"line 3:1: record: appears twice"}},
		{"several errors at once", "version: 1\nservices:\n  a: {kind: nope}\n  b: {kind: sleep}\n", []string{"services.a.kind: unknown kind", "services.b.duration: missing"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := Parse([]byte(tt.src))
			if err == nil {
				t.Fatal("Parse succeeded, want an error")
			}
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 {
				t.Fatalf("error %T is not a non-empty ErrorList", err)
			}
			for _, want := range tt.want {
				if !strings.Contains(err.Error(), want) {
					t.Errorf("error:\n%v\nwant it to contain:\n%s", err, want)
				}
			}
		})
	}
}

func TestLoadFileErrorsNameTheFile(t *testing.T) {
	path := filepath.Join(t.TempDir(), "peer.yaml")
	if err := os.WriteFile(path, []byte("version: 1\nservices:\n  a: {kind: nope}\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	_, err := LoadFile(path)
	want := path + `:3:13: services.a.kind: unknown kind "nope"`
	if err == nil || !strings.Contains(err.Error(), want) {
		t.Fatalf("LoadFile error = %v, want it to contain %q", err, want)
	}
	if _, err := LoadFile(filepath.Join(t.TempDir(), "missing.yaml")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("LoadFile(missing) = %v, want os.ErrNotExist", err)
	}
}

func TestParseRejectsHugeFile(t *testing.T) {
	data := []byte("version: 1\n" + strings.Repeat("#", MaxFileSize))
	if _, err := Parse(data); err == nil || !strings.Contains(err.Error(), "larger than") {
		t.Fatalf("Parse(huge) = %v, want a size error", err)
	}
}

func TestParseAliases(t *testing.T) {
	src := "version: 1\nservices:\n  a: &fast {kind: sleep, duration: 5ms}\n  b: *fast\n"
	r, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	if !r.Offers("a") || !r.Offers("b") {
		t.Errorf("Names() = %q, want a and b", r.Names())
	}
}

// TestParseMaxConcurrent: a named service has a limit of its own; the
// names a pattern matches share the pattern's.
func TestParseMaxConcurrent(t *testing.T) {
	r, err := Parse([]byte("version: 1\nservices:\n  a: {kind: echo, max_concurrent: 2}\n  b: {kind: echo}\npatterns:\n  - {match: \"S*\", kind: echo, max_concurrent: 3}\n"))
	if err != nil {
		t.Fatal(err)
	}
	for _, tt := range []struct {
		name, group string
		limit       int
	}{{"a", "services.a", 2}, {"b", "", 0}, {"S1", "patterns[0] S*", 3}, {"S2", "patterns[0] S*", 3}} {
		s, ok := r.Lookup(tt.name)
		if !ok {
			t.Fatalf("%s not offered", tt.name)
		}
		if g, l := Concurrency(s); g != tt.group || l != tt.limit {
			t.Errorf("Concurrency(%s) = %q, %d; want %q, %d", tt.name, g, l, tt.group, tt.limit)
		}
	}
}
