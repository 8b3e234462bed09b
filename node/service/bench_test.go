package service

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
)

func BenchmarkParse(b *testing.B) {
	data, err := os.ReadFile(filepath.Join("testdata", "services.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(data)))
	for b.Loop() {
		if _, err := Parse(data); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkLookupPattern(b *testing.B) {
	r, err := LoadFile(filepath.Join("testdata", "testnet.yaml"))
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		if _, ok := r.Lookup("mProject_ID0000001"); !ok {
			b.Fatal("not offered")
		}
	}
}

func BenchmarkInvokeEcho(b *testing.B) {
	s := lookup(b, "version: 1\nservices:\n  S2: {kind: echo}\n", "S2")
	req := testRequest()
	for b.Loop() {
		if _, err := s.Invoke(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkInvokeExec is the fixed cost of an exec service: fork, exec
// cat, JSON both ways, wait, kill the group.
func BenchmarkInvokeExec(b *testing.B) {
	s := lookup(b, "version: 1\nservices:\n  mirror: {kind: exec, command: [cat]}\n", "mirror")
	req := testRequest()
	for b.Loop() {
		if _, err := s.Invoke(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkInvokeHTTP(b *testing.B) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		fmt.Fprint(w, `{"ok":true}`)
	}))
	defer srv.Close()
	s := lookup(b, fmt.Sprintf("version: 1\nservices:\n  hook: {kind: http, url: %q}\n", srv.URL), "hook")
	req := testRequest()
	for b.Loop() {
		if _, err := s.Invoke(context.Background(), req); err != nil {
			b.Fatal(err)
		}
	}
}
