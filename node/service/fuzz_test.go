package service

import (
	"errors"
	"os"
	"path/filepath"
	"testing"
)

func FuzzParse(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("testdata", "*.yaml"))
	for _, file := range files {
		if b, err := os.ReadFile(file); err == nil {
			f.Add(b)
		}
	}
	for _, s := range []string{
		"",
		"version: 1\n",
		"version: 1\nservices:\n  a: &x {kind: echo}\n  b: *x\n",
		"version: 1\nservices:\n  a: {kind: sleep, from_request: true, scale: .inf}\n",
		"version: 1\npatterns:\n  - {match: \"[\", kind: echo}\n",
		"version: 1\nservices: {a: {kind: exec, command: [sh], env: {A: 1}, headers: x}}\n",
		"version: 1\nservices:\n  a: {kind: fail, probability: .nan, seed: 99999999999999999999}\n",
		"a: &a [*a]\n",
		"version: 1\n---\n",
		"{version: 1, services: {<<: {kind: echo}}}\n",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		r, err := Parse(data)
		if err != nil {
			var list ErrorList
			if !errors.As(err, &list) || len(list) == 0 || len(list) > maxErrors {
				t.Fatalf("error %T (%v) is not a non-empty ErrorList of at most %d", err, err, maxErrors)
			}
			for _, e := range list {
				if e.Msg == "" {
					t.Fatalf("error without a message: %+v", e)
				}
			}
			return
		}
		for _, name := range r.Names() {
			s, ok := r.Lookup(name)
			if !ok || s == nil || s.Kind() == "" || s.Expect() < 0 {
				t.Fatalf("declared service %q: Lookup = %v, %v", name, s, ok)
			}
		}
		r.Patterns()
		r.Offers("S1")
	})
}
