package testnet

import (
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// TestLineTail: a tail starts at the file's end, returns only complete
// lines, keeps a torn line until its end arrives, and starts a file that
// did not exist yet at its beginning.
func TestLineTail(t *testing.T) {
	dir := t.TempDir()
	a := filepath.Join(dir, "a.log")
	b := filepath.Join(dir, "b.log")
	if err := os.WriteFile(a, []byte("old line\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tail := newLineTail([]string{a, b})
	appendTo := func(p, s string) {
		f, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(s); err != nil {
			t.Fatal(err)
		}
	}
	read := func(i int) string {
		var got []string
		tail.lines(i, func(l []byte) { got = append(got, string(l)) })
		return strings.Join(got, "|")
	}
	appendTo(a, "one\ntw")
	appendTo(b, "first\n")
	if got := read(0); got != "one" {
		t.Errorf("a: %q, want only the complete new line", got)
	}
	if got := read(1); got != "first" {
		t.Errorf("b (created after the tail): %q", got)
	}
	appendTo(a, "o\nthree\n")
	if got := read(0); got != "two|three" {
		t.Errorf("a after the torn line ended: %q", got)
	}
	if got := read(0); got != "" {
		t.Errorf("a with nothing new: %q", got)
	}
}
