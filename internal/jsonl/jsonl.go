// Package jsonl reads files of one JSON object per line that other
// processes append to while they may be killed at any moment: the node's
// events file and the services' invocation record.
package jsonl

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
)

// Read decodes every line of the file at path into a T, in file order.
// Blank lines are skipped, and so is a last line without its newline that
// does not parse (its writer was killed mid-write); any other line that
// does not parse is an error naming path and line number. A missing file
// is an error matching os.ErrNotExist.
func Read[T any](path string) ([]T, error) {
	data, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var out []T
	for n := 1; len(data) > 0; n++ {
		line, rest, complete := bytes.Cut(data, []byte("\n"))
		data = rest
		if len(bytes.TrimSpace(line)) == 0 {
			continue
		}
		var v T
		if err := json.Unmarshal(line, &v); err != nil {
			if !complete {
				break // torn last line
			}
			return out, fmt.Errorf("%s:%d: %w", path, n, err)
		}
		out = append(out, v)
	}
	return out, nil
}
