package service

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"gopkg.in/yaml.v3"

	"github.com/bedwe/bedwe/internal/jsonl"
)

// InvocationRecord is one line of a record file (the services file's record
// field): one service execution that started. It is written before the
// service runs, so a process killed mid-step has already written it.
type InvocationRecord struct {
	// At is when the attempt started (UTC, RFC 3339 with nanoseconds).
	At time.Time `json:"at"`
	// Workflow is the request's WorkflowID.
	Workflow string `json:"workflow"`
	// Step is the request's Step.
	Step string `json:"step"`
	// Service is the name the service was looked up by.
	Service string `json:"service"`
	// Attempt is the request's Attempt.
	Attempt int `json:"attempt"`
	// Key is the request's IdempotencyKey.
	Key string `json:"key"`
	// Peer is the request's Peer: the peer that ran the attempt.
	Peer string `json:"peer"`
	// Once is true when the step is at-most-once (step attribute once=true).
	Once bool `json:"once"`
}

// attrOnce is the step attribute that marks an at-most-once step (the
// grammar package's AttrOnce).
const attrOnce = "once"

// ReadRecords reads a record file: one InvocationRecord per line, in the
// order they were written. A last line without its newline that is not valid
// JSON (a writer stopped mid-write) is skipped; any other bad line is an
// error naming its line number.
func ReadRecords(path string) ([]InvocationRecord, error) {
	recs, err := jsonl.Read[InvocationRecord](path)
	if err != nil {
		return nil, fmt.Errorf("read records: %w", err)
	}
	return recs, nil
}

// recorder appends InvocationRecords to a registry's record file. The file
// is opened on first use and stays open; an open that fails is tried again
// on the next invocation.
type recorder struct {
	path string // absolute
	mu   sync.Mutex
	f    *os.File
}

// record writes the line for an attempt of service name that is about to
// start, in one write call so that lines from concurrent writers (other
// goroutines or processes appending to the same file) do not interleave. It
// does not sync: the line only has to survive the process, not the machine.
func (r *recorder) record(name string, req Request) error {
	line, err := json.Marshal(InvocationRecord{
		At:       time.Now().UTC(),
		Workflow: req.WorkflowID,
		Step:     req.Step,
		Service:  name,
		Attempt:  req.Attempt,
		Key:      req.IdempotencyKey,
		Peer:     req.Peer,
		Once:     req.Attrs[attrOnce] == "true",
	})
	if err != nil {
		return r.cannotWrite(err)
	}
	f, err := r.file()
	if err != nil {
		return r.cannotWrite(err)
	}
	if _, err := f.Write(append(line, '\n')); err != nil {
		return r.cannotWrite(err)
	}
	return nil
}

// file returns the open record file, opening it if needed.
func (r *recorder) file() (*os.File, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.f == nil {
		f, err := os.OpenFile(r.path, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			return nil, err
		}
		r.f = f
	}
	return r.f, nil
}

// cannotWrite describes a failure to record an attempt, which is therefore
// not run.
func (r *recorder) cannotWrite(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		err = pe.Err // the path is named below
	}
	return fmt.Errorf("record file %q cannot be written (%v), so the service was not run", r.path, err)
}

// record checks the record field and returns the record file's absolute
// path: a relative path is taken relative to the services file's directory
// (the current directory for Parse).
func (p *parser) record(n *yaml.Node) string {
	if n.Kind != yaml.ScalarNode || n.Tag != "!!str" || n.Value == "" {
		p.errorf(n, "record", "want the path of a file to append invocation records to, got %s", describe(n))
		return ""
	}
	path := p.str(n, "record")
	if path == "" {
		return ""
	}
	if !filepath.IsAbs(path) && p.file != "" {
		path = filepath.Join(filepath.Dir(p.file), path)
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		p.errorf(n, "record", "cannot make %q absolute: %v", path, err)
		return ""
	}
	return abs
}
