package service

import (
	"context"
	"encoding/json"
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestLookupPrecedence(t *testing.T) {
	t.Parallel()
	src := `version: 1
services:
  S1: {kind: echo}
patterns:
  - {match: "S*", kind: sleep, duration: 1ms}
  - {match: "*", kind: fail, probability: 1}
`
	r, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		kind string // "" = not offered
	}{
		{"S1", KindEcho},  // explicit wins over the pattern
		{"S2", KindSleep}, // first matching pattern
		{"mProject_ID0000001", KindFail},
		{"", ""},
		{"FORK", ""},  // a keyword is never a service
		{"a/b", ""},   // not a service name
		{"S1 S2", ""}, // not a service name
		{"S\x00", ""}, // not a service name
	}
	for _, tt := range tests {
		s, ok := r.Lookup(tt.name)
		if ok != (tt.kind != "") || r.Offers(tt.name) != ok {
			t.Errorf("Lookup(%q) found = %v, want %v", tt.name, ok, tt.kind != "")
			continue
		}
		if ok && s.Kind() != tt.kind {
			t.Errorf("Lookup(%q).Kind() = %q, want %q", tt.name, s.Kind(), tt.kind)
		}
	}
	// A pattern service carries the name it was looked up by.
	s, _ := r.Lookup("mProject_ID0000001")
	_, err = s.Invoke(context.Background(), Request{})
	var f *Failure
	if !errors.As(err, &f) || f.Service != "mProject_ID0000001" {
		t.Errorf("pattern failure names service %v", err)
	}
}

func TestUndeclaredIsNotOffered(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte("version: 1\nservices:\n  resize: {kind: echo}\n"))
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := r.Lookup("rm"); ok || r.Offers("rm") {
		t.Error("an undeclared service is offered")
	}
}

func TestDefault(t *testing.T) {
	t.Parallel()
	all, err := Default()
	if err != nil {
		t.Fatal(err)
	}
	if got := all.Patterns(); !slices.Equal(got, []string{"*"}) {
		t.Errorf("Default().Patterns() = %q", got)
	}
	s, ok := all.Lookup("mProject_ID0000001")
	if !ok || s.Kind() != KindSleep || s.Expect() != DefaultSleep {
		t.Fatalf("Default() does not offer a fast sleep for any name: %v %v", ok, s)
	}
	out, err := s.Invoke(context.Background(), Request{Attrs: map[string]string{"sleep": "1ms"}})
	if err != nil || string(out) != `{"slept_ms":1}` {
		t.Errorf("Default sleep with sleep=1ms gave %s, %v", out, err)
	}

	some, err := Default("S*", "T?")
	if err != nil {
		t.Fatal(err)
	}
	if !some.Offers("S10") || !some.Offers("T1") || some.Offers("T10") || some.Offers("U1") {
		t.Errorf("Default(S*, T?) offers the wrong names")
	}
	if _, err := Default("S["); err == nil || !strings.Contains(err.Error(), `"S["`) {
		t.Errorf("Default(S[) error = %v, want a bad pattern error", err)
	}
}

func TestNewRegistryAndFunc(t *testing.T) {
	t.Parallel()
	double := Func("go", time.Second, func(ctx context.Context, req Request) (json.RawMessage, error) {
		return json.RawMessage(`{"n":14}`), nil
	})
	bad := Func("go", 0, func(ctx context.Context, req Request) (json.RawMessage, error) {
		return json.RawMessage(`14`), nil
	})
	r, err := NewRegistry(map[string]Service{"double": double, "bad": bad})
	if err != nil {
		t.Fatal(err)
	}
	if got := r.Names(); !slices.Equal(got, []string{"bad", "double"}) {
		t.Errorf("Names() = %q", got)
	}
	s, _ := r.Lookup("double")
	if out, err := s.Invoke(context.Background(), Request{}); err != nil || string(out) != `{"n":14}` || s.Expect() != time.Second {
		t.Errorf("Func service gave %s, %v", out, err)
	}
	s, _ = r.Lookup("bad")
	var f *Failure
	if _, err := s.Invoke(context.Background(), Request{Service: "bad"}); !errors.As(err, &f) {
		t.Errorf("a non-object result gave %v, want *Failure", err)
	}
	if _, err := NewRegistry(map[string]Service{"ENDCHOICE": double}); err == nil {
		t.Error("NewRegistry accepted a keyword as a service name")
	}
}

// TestDeclaredTimeout: the node reads a service's own timeout to decide
// whether its default step deadline applies (and which limit to name).
func TestDeclaredTimeout(t *testing.T) {
	t.Parallel()
	r, err := Parse([]byte(`version: 1
services:
  boom: {kind: fail, probability: 1, timeout: 10s}
  plain: {kind: echo}
patterns:
  - {match: "S*", kind: sleep, duration: 1ms, timeout: 250ms}
`))
	if err != nil {
		t.Fatal(err)
	}
	for name, want := range map[string]time.Duration{"boom": 10 * time.Second, "plain": 0, "S7": 250 * time.Millisecond} {
		s, ok := r.Lookup(name)
		if !ok {
			t.Fatalf("%s not offered", name)
		}
		if got := DeclaredTimeout(s); got != want {
			t.Errorf("DeclaredTimeout(%s) = %s, want %s", name, got, want)
		}
	}
	f := Func("custom", 0, func(context.Context, Request) (json.RawMessage, error) { return json.RawMessage(`{}`), nil })
	if got := DeclaredTimeout(f); got != 0 {
		t.Errorf("DeclaredTimeout(Func) = %s, want 0", got)
	}
}
