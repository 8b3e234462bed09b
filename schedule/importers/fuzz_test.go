package importers

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"
)

// FuzzImporters feeds arbitrary bytes to every importer: none may panic, and
// whatever an importer returns must marshal.
func FuzzImporters(f *testing.F) {
	files, _ := filepath.Glob(filepath.Join("..", "testdata", "*"))
	for _, p := range files {
		if b, err := os.ReadFile(p); err == nil {
			f.Add(b)
		}
	}
	opts := Options{IssuedAt: time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), TimeZone: "UTC"}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, imp := range []func([]byte) error{
			func(b []byte) error { s, _, err := CSV(bytes.NewReader(b), opts); return marshal(s, err) },
			func(b []byte) error { s, _, err := StageYAML(bytes.NewReader(b), opts); return marshal(s, err) },
			func(b []byte) error { s, _, err := AreaJSON(bytes.NewReader(b), opts); return marshal(s, err) },
			func(b []byte) error { s, _, err := Feeder(bytes.NewReader(b), opts); return marshal(s, err) },
		} {
			if err := imp(data); err != nil {
				t.Fatal(err)
			}
		}
	})
}

// marshal returns an error only if a schedule that was returned fails to
// marshal or to answer a query.
func marshal(s interface {
	Marshal() ([]byte, error)
}, err error) error {
	if err != nil {
		return nil
	}
	_, err = s.Marshal()
	return err
}
