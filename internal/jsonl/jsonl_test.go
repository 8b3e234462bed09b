package jsonl

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

type rec struct {
	A int `json:"a"`
}

func TestRead(t *testing.T) {
	dir := t.TempDir()
	write := func(name, text string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
		return p
	}
	tests := []struct {
		name, text string
		want       int
		err        string
	}{
		{"whole", "{\"a\":1}\n{\"a\":2}\n", 2, ""},
		{"blank lines", "{\"a\":1}\n\n  \n{\"a\":2}\n", 2, ""},
		{"torn last line", "{\"a\":1}\n{\"a\":", 1, ""},
		{"bad middle line", "{\"a\":1}\nnope\n{\"a\":2}\n", 1, ":2: "},
		{"bad last line with its newline", "{\"a\":1}\nnope\n", 1, ":2: "},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Read[rec](write(string(rune('a'+i))+".jsonl", tt.text))
			if len(got) != tt.want {
				t.Errorf("read %d values, want %d", len(got), tt.want)
			}
			if (err == nil) != (tt.err == "") || (err != nil && !strings.Contains(err.Error(), tt.err)) {
				t.Errorf("err = %v, want one containing %q", err, tt.err)
			}
		})
	}
	if _, err := Read[rec](filepath.Join(dir, "missing.jsonl")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("missing file: err = %v, want os.ErrNotExist", err)
	}
}
