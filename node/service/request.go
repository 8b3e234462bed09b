package service

import (
	"bytes"
	"context"
	"encoding/json"
	"strconv"
	"time"
)

// Request is what one attempt of a service receives, as JSON: on stdin for
// exec, as the POST body for http.
type Request struct {
	// WorkflowID identifies the workflow run.
	WorkflowID string `json:"workflow_id"`
	// Step is the step's path inside the submitted workflow (stable across
	// hand-offs and retries).
	Step string `json:"step"`
	// Service is the service name as the workflow names it; Invoke fills it
	// in when empty.
	Service string `json:"service"`
	// Attempt counts attempts of this step, from 1.
	Attempt int `json:"attempt"`
	// IdempotencyKey is IdempotencyKey(WorkflowID, Step, Attempt); a service
	// can use it to deduplicate repeated deliveries.
	IdempotencyKey string `json:"idempotency_key"`
	// Input is the workflow's input.
	Input json.RawMessage `json:"input"`
	// Outputs holds the outputs of earlier steps on this step's path, by
	// output label: all of them, or only those the step names with reads=
	// (nil for reads=()).
	Outputs map[string]json.RawMessage `json:"outputs"`
	// Attrs are the step's attributes as written in the workflow
	// (S1[timeout=2s] gives {"timeout": "2s"}); services may read them.
	Attrs map[string]string `json:"attrs,omitempty"`
	// Peer is the libp2p peer ID of the peer running this attempt; the node
	// fills it in. The record file (see the package doc) logs it.
	Peer string `json:"peer,omitempty"`
}

// IdempotencyKey returns the key that names one attempt of one step of one
// workflow: "WORKFLOW:STEP:ATTEMPT". Step paths and workflow ids contain no
// colon, so the key is unambiguous.
func IdempotencyKey(workflowID, step string, attempt int) string {
	return workflowID + ":" + step + ":" + strconv.Itoa(attempt)
}

// Service is one declared, runnable service. Implementations are safe for
// concurrent use.
type Service interface {
	// Kind names the implementation: exec, http, sleep, echo, fail.
	Kind() string
	// Invoke runs one attempt. The result is a JSON object. Errors are a
	// *Failure, a *Timeout, or wrap context.Canceled (see the package doc).
	Invoke(ctx context.Context, req Request) (json.RawMessage, error)
	// Expect is the expected run time of one attempt, used to choose a peer
	// that stays powered long enough; zero means unknown.
	Expect() time.Duration
}

// Kinds of service.
const (
	KindExec  = "exec"
	KindHTTP  = "http"
	KindSleep = "sleep"
	KindEcho  = "echo"
	KindFail  = "fail"
)

// MaxOutput bounds a service's result (exec stdout or http body), in bytes.
const MaxOutput = 16 << 20

// asObject returns out without surrounding white space if it is a JSON
// object, or a description of what is wrong with it.
func asObject(out []byte) (json.RawMessage, string) {
	out = bytes.TrimSpace(out)
	switch {
	case len(out) == 0:
		return nil, "output is empty, want a JSON object"
	case out[0] != '{':
		if !json.Valid(out) {
			return nil, "output is not JSON, want a JSON object: " + snippet(out)
		}
		return nil, "output is JSON but not an object, want a JSON object: " + snippet(out)
	case !json.Valid(out):
		return nil, "output is not valid JSON, want a JSON object: " + snippet(out)
	}
	return json.RawMessage(out), ""
}

// snippet quotes the start of b for an error message.
func snippet(b []byte) string {
	const n = 80
	if len(b) > n {
		return strconv.Quote(string(b[:n])) + "..."
	}
	return strconv.Quote(string(b))
}
