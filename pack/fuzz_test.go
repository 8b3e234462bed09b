package pack

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"testing"
)

// fuzzSeeds are the packs whose encodings seed FuzzDecode, in code and in
// the committed corpus under testdata/fuzz/FuzzDecode.
func fuzzSeeds() []*Pack {
	deep := minimalPack()
	deep.Workflow = nestedForks(8)
	return []*Pack{minimalPack(), fullPack(), residualPack(5, 3), deep}
}

// FuzzDecode checks that Decode never panics and that whatever it accepts is
// canonical: re-encoding gives bytes that decode to an equal pack and
// re-encode to the same bytes.
func FuzzDecode(f *testing.F) {
	for _, p := range fuzzSeeds() {
		b, err := Encode(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte("BP\x01"))
	f.Add([]byte("BP\x02\xa0"))
	lim := DefaultLimits()
	f.Fuzz(func(t *testing.T, b []byte) {
		p1, err := Decode(b, lim)
		if err != nil {
			return
		}
		enc1, err := Encode(p1)
		if err != nil {
			t.Fatalf("Encode of a decoded pack failed: %v", err)
		}
		p2, err := Decode(enc1, lim)
		if err != nil {
			t.Fatalf("Decode of a re-encoded pack failed: %v", err)
		}
		if !reflect.DeepEqual(p1, p2) {
			t.Fatalf("re-decoded pack differs\n p1: %+v\n p2: %+v", p1, p2)
		}
		enc2, err := Encode(p2)
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(enc1, enc2) {
			t.Fatalf("encoding is not stable")
		}
		if c := p1.Clone(); !reflect.DeepEqual(c, p1) {
			t.Fatalf("clone differs")
		}
	})
}

// TestWriteFuzzCorpus rewrites the committed FuzzDecode seed corpus when run
// with -update, so the seeds follow the wire format.
func TestWriteFuzzCorpus(t *testing.T) {
	if !*update {
		t.Skip("run with -update to rewrite testdata/fuzz/FuzzDecode")
	}
	dir := filepath.Join("testdata", "fuzz", "FuzzDecode")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	names := []string{"minimal", "full", "residual", "deep"}
	for i, p := range fuzzSeeds() {
		b := mustEncode(t, p)
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+names[i]), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// Also a few hostile shapes: a newer version, a bad magic, a deep array.
	hostile := map[string][]byte{
		"version2":   []byte("BP\x02\xa0"),
		"badmagic":   []byte("XX\x01\xa0"),
		"deeparrays": append([]byte("BP\x01\xa1\x03"), bytes.Repeat([]byte{0x81}, 300)...),
	}
	for name, b := range hostile {
		body := fmt.Sprintf("go test fuzz v1\n[]byte(%q)\n", b)
		if err := os.WriteFile(filepath.Join(dir, "seed-"+name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}
