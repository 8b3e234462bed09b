package heartbeat

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/jonboulle/clockwork"
)

// beatLog is a send func that records the fake time of each beat.
type beatLog struct {
	clock *clockwork.FakeClock
	at    chan time.Time
	fail  int   // the call (1-based) that fails, or 0
	err   error // what it fails with
	calls int   // only touched by the Beater's goroutine
	slow  time.Duration
}

func newBeatLog(clock *clockwork.FakeClock) *beatLog {
	return &beatLog{clock: clock, at: make(chan time.Time, 1024)}
}

func (l *beatLog) send() error {
	l.calls++
	l.at <- l.clock.Now()
	if l.calls == l.fail {
		return l.err
	}
	if l.slow > 0 {
		l.clock.Advance(l.slow) // the write itself takes this long
	}
	return nil
}

func startBeater(t *testing.T, ctx context.Context, clock clockwork.Clock, interval time.Duration, send func() error) *Beater {
	t.Helper()
	b, err := StartBeater(ctx, clock, interval, send)
	if err != nil {
		t.Fatalf("StartBeater: %v", err)
	}
	t.Cleanup(b.Stop)
	return b
}

// The first beat goes at once and the next ones exactly every interval.
func TestBeaterCadence(t *testing.T) {
	const interval = 250 * time.Millisecond
	clock := clockwork.NewFakeClockAt(epoch)
	log := newBeatLog(clock)
	startBeater(t, context.Background(), clock, interval, log.send)
	for i := range 20 {
		at := recv(t, log.at, "a beat")
		if want := epoch.Add(time.Duration(i) * interval); !at.Equal(want) {
			t.Fatalf("beat %d at %v, want %v", i, at.Sub(epoch), want.Sub(epoch))
		}
		waitWaiters(t, clock, 1)
		// Half an interval later the next beat is not due yet: the timer is
		// still armed, so no send can be under way.
		clock.Advance(interval / 2)
		waitWaiters(t, clock, 1)
		clock.Advance(interval - interval/2)
	}
}

// A send slower than the interval is followed by a quarter-interval rest,
// not by a burst.
func TestBeaterSlowSend(t *testing.T) {
	const interval = 100 * time.Millisecond
	clock := clockwork.NewFakeClockAt(epoch)
	log := newBeatLog(clock)
	log.slow = 3 * interval
	startBeater(t, context.Background(), clock, interval, log.send)
	prev := recv(t, log.at, "the first beat")
	for range 5 {
		waitWaiters(t, clock, 1)
		clock.Advance(interval / 4)
		at := recv(t, log.at, "a beat")
		if gap := at.Sub(prev); gap != log.slow+interval/4 {
			t.Fatalf("beat %v after the previous one began, want %v", gap, log.slow+interval/4)
		}
		prev = at
	}
}

func TestBeaterStops(t *testing.T) {
	errBoom := errors.New("stream reset")
	tests := []struct {
		name    string
		stop    func(b *Beater, cancel context.CancelFunc)
		fail    int // send call that fails
		wantErr error
		wantN   int // sends before stopping
	}{
		{name: "Stop", stop: func(b *Beater, _ context.CancelFunc) { b.Stop() }, wantN: 3},
		{name: "context", stop: func(_ *Beater, cancel context.CancelFunc) { cancel() }, wantN: 3},
		{name: "send fails", fail: 3, wantErr: errBoom, wantN: 3},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			const interval = time.Second
			clock := clockwork.NewFakeClockAt(epoch)
			log := newBeatLog(clock)
			log.fail, log.err = tc.fail, errBoom
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			b := startBeater(t, ctx, clock, interval, log.send)
			for i := range 3 {
				recv(t, log.at, "a beat")
				if i < 2 {
					waitWaiters(t, clock, 1)
					clock.Advance(interval)
				}
			}
			if b.Err() != nil && tc.wantErr == nil {
				t.Errorf("Err while running = %v, want nil", b.Err())
			}
			if tc.stop != nil {
				waitWaiters(t, clock, 1)
				tc.stop(b, cancel)
			}
			recv(t, b.Done(), "Done")
			b.Stop() // idempotent, and returns at once after Done
			clock.Advance(10 * interval)
			if n := log.calls; n != tc.wantN {
				t.Errorf("send called %d times, want %d", n, tc.wantN)
			}
			if err := b.Err(); !errors.Is(err, tc.wantErr) || (tc.wantErr == nil) != (err == nil) {
				t.Errorf("Err = %v, want %v", err, tc.wantErr)
			}
		})
	}
}

func TestStartBeaterRejects(t *testing.T) {
	clock := clockwork.NewFakeClock()
	send := func() error { return nil }
	tests := []struct {
		name     string
		clock    clockwork.Clock
		interval time.Duration
		send     func() error
	}{
		{"nil clock", nil, time.Second, send},
		{"zero interval", clock, 0, send},
		{"nil send", clock, time.Second, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if b, err := StartBeater(context.Background(), tc.clock, tc.interval, tc.send); err == nil {
				b.Stop()
				t.Fatal("StartBeater succeeded, want an error")
			}
		})
	}
}

// End to end on one fake clock: a Beater feeding a Watcher with the
// testnet defaults keeps the subject alive for five virtual minutes; once it
// stops, the subject is reported within 1.5 s.
func TestBeaterKeepsWatcherQuiet(t *testing.T) {
	cfg := DefaultTestnetConfig()
	h := newHarness(t, cfg)
	const key = "peer/wf/s1"
	h.watch(key)
	var last time.Time
	b := startBeater(t, context.Background(), h.clock, cfg.Interval, func() error {
		if !h.w.Beat(key) {
			return errors.New("not watched")
		}
		last = h.clock.Now()
		return nil
	})
	h.idle = 2
	h.waitArmed(2)
	h.advanceTo(epoch.Add(5 * time.Minute))
	if got := h.drain(); len(got) != 0 {
		t.Fatalf("beating subject suspected: %v (beater err %v)", got, b.Err())
	}
	b.Stop()
	stopped := last
	h.idle = 1
	s, ok := h.tickUntilSuspicion(10 * time.Second)
	if !ok {
		t.Fatal("stopped subject never reported")
	}
	if s.Silence != s.At.Sub(stopped) || s.Silence <= cfg.Interval || s.Silence > 1500*time.Millisecond {
		t.Errorf("reported after %v of silence (last beat %v before), want in (%v, 1.5s]",
			s.Silence, s.At.Sub(stopped), cfg.Interval)
	}
	if st := h.w.Stats(); st.Beats < uint64(5*time.Minute/cfg.Interval) {
		t.Errorf("only %d beats in 5 minutes", st.Beats)
	}
}

func waitWaiters(t *testing.T, clock *clockwork.FakeClock, n int) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := clock.BlockUntilContext(ctx, n); err != nil {
		t.Fatalf("waiting for %d clock waiters: %v", n, err)
	}
}
