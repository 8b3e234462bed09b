package service

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"strconv"
	"strings"
	"testing"
)

// httpService declares an http service posting to url.
func httpService(t *testing.T, url, extra string) Service {
	t.Helper()
	src := fmt.Sprintf("version: 1\nservices:\n  hook: {kind: http, url: %q, headers: {X-Key: abc}%s}\n", url, extra)
	r, err := Parse([]byte(src))
	if err != nil {
		t.Fatal(err)
	}
	s, _ := r.Lookup("hook")
	return s
}

func TestHTTPSuccessSendsRequest(t *testing.T) {
	t.Parallel()
	type seen struct {
		method, ctype, key, xkey string
		req                      Request
		err                      error
	}
	got := make(chan seen, 1)
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		s := seen{method: r.Method, ctype: r.Header.Get("Content-Type"), key: r.Header.Get("Idempotency-Key"), xkey: r.Header.Get("X-Key")}
		s.err = json.NewDecoder(r.Body).Decode(&s.req)
		got <- s
		fmt.Fprint(w, " {\"done\": true}\n")
	}))
	defer srv.Close()

	out, err := httpService(t, srv.URL+"/notify", "").Invoke(context.Background(), testRequest())
	if err != nil {
		t.Fatal(err)
	}
	if string(out) != `{"done": true}` {
		t.Errorf("result = %s", out)
	}
	s := <-got
	if s.err != nil {
		t.Fatalf("body is not a JSON request: %v", s.err)
	}
	if s.method != http.MethodPost || s.ctype != "application/json" || s.key != "wf-1:3/f1/0:2" || s.xkey != "abc" {
		t.Errorf("request: method %s, Content-Type %q, Idempotency-Key %q, X-Key %q", s.method, s.ctype, s.key, s.xkey)
	}
	if s.req.Service != "hook" || s.req.IdempotencyKey != "wf-1:3/f1/0:2" || string(s.req.Input) != `{"n":7}` {
		t.Errorf("request body = %+v", s.req)
	}
}

func TestHTTPFailures(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		status int
		body   string
		cause  string
	}{
		{"server error", 500, "database is down", "500 Internal Server Error"},
		{"not found", 404, "no such hook", "404 Not Found"},
		{"redirect is not followed", 302, "", "302 Found"},
		{"not an object", 200, `["a"]`, "output is JSON but not an object"},
		{"not JSON", 200, "<html>", "output is not JSON"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if tt.status == 302 {
					w.Header().Set("Location", "/elsewhere")
				}
				w.WriteHeader(tt.status)
				io.WriteString(w, tt.body)
			}))
			defer srv.Close()
			_, err := httpService(t, srv.URL, "").Invoke(context.Background(), testRequest())
			var f *Failure
			if !errors.As(err, &f) {
				t.Fatalf("Invoke error = %v (%T), want *Failure", err, err)
			}
			if f.Status != tt.status || !strings.Contains(f.Cause, tt.cause) || !strings.Contains(f.Body, tt.body) {
				t.Errorf("Failure = %+v, want status %d, cause ~%q, body ~%q", f, tt.status, tt.cause, tt.body)
			}
			if tt.body != "" && !strings.Contains(err.Error(), strconv.Quote(tt.body)) {
				t.Errorf("Error() = %q does not show the body", err)
			}
		})
	}
}

func TestHTTPConnectionRefused(t *testing.T) {
	t.Parallel()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := l.Addr().String()
	l.Close()
	_, err = httpService(t, "http://"+addr+"/x", "").Invoke(context.Background(), testRequest())
	var f *Failure
	if !errors.As(err, &f) || !strings.Contains(f.Cause, "POST http://"+addr) {
		t.Fatalf("Invoke error = %v, want a *Failure naming the URL", err)
	}
}

// hangingServer answers only when the client gives up. (The server notices
// a closed connection only once the request body has been read.)
func hangingServer(t *testing.T) *httptest.Server {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		<-r.Context().Done()
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestHTTPTimeout(t *testing.T) {
	t.Parallel()
	srv := hangingServer(t)
	_, err := httpService(t, srv.URL, ", timeout: 200ms").Invoke(context.Background(), testRequest())
	var to *Timeout
	if !errors.As(err, &to) || to.Caller || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Invoke error = %v (%T), want the service's *Timeout", err, err)
	}
}

func TestHTTPCancel(t *testing.T) {
	t.Parallel()
	arrived := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		io.Copy(io.Discard, r.Body)
		close(arrived)
		<-r.Context().Done()
	}))
	defer srv.Close()
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		<-arrived
		cancel()
	}()
	_, err := httpService(t, srv.URL, "").Invoke(ctx, testRequest())
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Invoke error = %v, want context.Canceled", err)
	}
}
