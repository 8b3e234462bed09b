package testnet

import (
	"bytes"
	"io"
	"os"
	"slices"
)

// lineTail reads files that other processes append to (node logs, events
// files), each from where it was when the tail was made, returning only
// complete lines: a line without its newline yet waits for the next read.
type lineTail struct {
	paths   []string
	offsets []int64
	partial [][]byte
}

// newLineTail starts tailing paths at their current ends (a missing file
// at its start).
func newLineTail(paths []string) *lineTail {
	t := &lineTail{paths: paths, offsets: make([]int64, len(paths)), partial: make([][]byte, len(paths))}
	for i, p := range paths {
		if fi, err := os.Stat(p); err == nil {
			t.offsets[i] = fi.Size()
		}
	}
	return t
}

// lines calls fn with every complete line file i gained since the last
// call, in order.
func (t *lineTail) lines(i int, fn func(line []byte)) {
	data, err := readFrom(t.paths[i], t.offsets[i])
	if err != nil || len(data) == 0 {
		return
	}
	t.offsets[i] += int64(len(data))
	data = append(t.partial[i], data...)
	last := bytes.LastIndexByte(data, '\n')
	if last < 0 {
		t.partial[i] = data
		return
	}
	t.partial[i] = slices.Clone(data[last+1:])
	for _, line := range bytes.Split(data[:last], []byte("\n")) {
		fn(line)
	}
}

// readFrom returns a file's bytes from offset on.
func readFrom(path string, offset int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	if _, err := f.Seek(offset, io.SeekStart); err != nil {
		return nil, err
	}
	return io.ReadAll(f)
}
