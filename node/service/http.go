package service

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
)

// httpClient is shared by all http services: no redirects (a redirected
// POST would silently become a GET), limits come from the context.
var httpClient = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// httpRunner POSTs the JSON request to a URL; a 2xx JSON object body is the
// result.
type httpRunner struct {
	url     string
	headers http.Header
}

func (h *httpRunner) kind() string { return KindHTTP }

func (h *httpRunner) run(ctx context.Context, req Request) ([]byte, error) {
	body, err := json.Marshal(req)
	if err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("encode request: %v", err), ExitCode: -1}
	}
	hreq, err := http.NewRequestWithContext(ctx, http.MethodPost, h.url, bytes.NewReader(body))
	if err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("build request: %v", err), ExitCode: -1}
	}
	for k, vs := range h.headers {
		hreq.Header[k] = vs
	}
	hreq.Header.Set("Content-Type", "application/json")
	hreq.Header.Set("Accept", "application/json")
	if req.IdempotencyKey != "" {
		hreq.Header.Set("Idempotency-Key", req.IdempotencyKey)
	}
	resp, err := httpClient.Do(hreq)
	if err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("POST %s: %v", h.url, err), ExitCode: -1}
	}
	defer resp.Body.Close()
	out, err := io.ReadAll(io.LimitReader(resp.Body, MaxOutput+1))
	if err != nil {
		return nil, &Failure{Cause: fmt.Sprintf("read response from %s: %v", h.url, err), ExitCode: -1, Status: resp.StatusCode}
	}
	if len(out) > MaxOutput {
		return nil, &Failure{Cause: fmt.Sprintf("response body exceeds %d bytes", MaxOutput), ExitCode: -1, Status: resp.StatusCode}
	}
	if resp.StatusCode < 200 || resp.StatusCode > 299 {
		return nil, &Failure{Cause: "POST " + h.url + ": " + resp.Status, ExitCode: -1, Status: resp.StatusCode, Body: bodyTail(out)}
	}
	obj, bad := asObject(out)
	if bad != "" {
		return nil, &Failure{Cause: bad, ExitCode: -1, Status: resp.StatusCode, Body: bodyTail(out)}
	}
	return obj, nil
}

// bodyTail keeps the last MaxStderr bytes of a response body.
func bodyTail(b []byte) string {
	t := tailBuffer{max: MaxStderr}
	t.Write(b)
	return t.String()
}
