package heartbeat

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
)

// Beater is the holder's side: it calls send once at start and then every
// interval until it is stopped, its context ends, or send fails. The node
// wraps one frame write on the long-lived heartbeat stream in send.
type Beater struct {
	stop     chan struct{}
	stopOnce sync.Once
	done     chan struct{}
	err      error // written before done is closed
}

// StartBeater starts beating on clock every interval (normally
// Config.Interval). The first beat is sent at once, from the Beater's own
// goroutine. The next is due interval after the previous send began; if a
// send takes longer than that, the Beater still waits a quarter interval so
// a slow stream is not flooded.
func StartBeater(ctx context.Context, clock clockwork.Clock, interval time.Duration, send func() error) (*Beater, error) {
	switch {
	case clock == nil:
		return nil, errors.New("start beater: nil clock")
	case interval <= 0:
		return nil, fmt.Errorf("start beater: interval must be > 0, got %v", interval)
	case send == nil:
		return nil, errors.New("start beater: nil send")
	}
	b := &Beater{stop: make(chan struct{}), done: make(chan struct{})}
	go b.run(ctx, clock, interval, send)
	return b, nil
}

func (b *Beater) run(ctx context.Context, clock clockwork.Clock, interval time.Duration, send func() error) {
	defer close(b.done)
	var timer clockwork.Timer
	for ctx.Err() == nil {
		began := clock.Now()
		if err := send(); err != nil {
			b.err = fmt.Errorf("heartbeat: send beat: %w", err)
			return
		}
		wait := max(interval-clock.Since(began), interval/4)
		if timer == nil {
			timer = clock.NewTimer(wait)
			defer timer.Stop()
		} else {
			timer.Reset(wait)
		}
		select {
		case <-b.stop:
			return
		case <-ctx.Done():
			return
		case <-timer.Chan():
		}
	}
}

// Stop stops the Beater and waits until it has; no send starts after Stop
// returns. It is safe to call more than once and from any goroutine except
// from inside send.
func (b *Beater) Stop() {
	b.stopOnce.Do(func() { close(b.stop) })
	<-b.done
}

// Done is closed when the Beater has stopped, for whatever reason.
func (b *Beater) Done() <-chan struct{} { return b.done }

// Err returns why the Beater stopped on its own: the send error, wrapped.
// It is nil while the Beater runs and when it was stopped by Stop or by
// its context.
func (b *Beater) Err() error {
	select {
	case <-b.done:
		return b.err
	default:
		return nil
	}
}
