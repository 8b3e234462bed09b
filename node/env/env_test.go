package env_test

import (
	"testing"
	"time"

	"github.com/jonboulle/clockwork"

	"github.com/bedwe/bedwe/node/env"
)

// draw takes one of each kind of number from r.
func draw(r *env.Rand) []int64 {
	var out []int64
	for range 20 {
		out = append(out, int64(r.IntN(1000)), r.Int64N(1<<40), int64(r.DurationN(time.Second)), int64(r.Float64()*1e9))
		s := []int64{1, 2, 3, 4, 5, 6, 7}
		r.Shuffle(len(s), func(i, j int) { s[i], s[j] = s[j], s[i] })
		out = append(out, s...)
	}
	return out
}

func TestSameSeedSameSequence(t *testing.T) {
	a, b := draw(env.NewRand(42)), draw(env.NewRand(42))
	for i := range a {
		if a[i] != b[i] {
			t.Fatalf("seed 42 drew %d then %d at %d", a[i], b[i], i)
		}
	}
	c := draw(env.NewRand(43))
	same := 0
	for i := range a {
		if a[i] == c[i] {
			same++
		}
	}
	if same == len(a) {
		t.Fatal("seeds 42 and 43 drew the same sequence")
	}
}

func TestRandConcurrent(t *testing.T) {
	r := env.NewRand(1)
	done := make(chan struct{})
	for range 8 {
		go func() {
			defer func() { done <- struct{}{} }()
			for range 1000 {
				if n := r.IntN(10); n < 0 || n >= 10 {
					t.Errorf("IntN(10) = %d", n)
				}
			}
		}()
	}
	for range 8 {
		<-done
	}
}

func TestReal(t *testing.T) {
	e := env.Real()
	if e.Clock == nil || e.Rand == nil {
		t.Fatalf("Real() = %+v: a part is unset", e)
	}
	if d := time.Since(e.Clock.Now()); d < 0 || d > time.Minute {
		t.Fatalf("Real clock is %s off the wall clock", d)
	}
	select {
	case <-e.Clock.After(time.Millisecond):
	case <-time.After(10 * time.Second):
		t.Fatal("Real clock's After never fired")
	}
	if n := e.Rand.IntN(10); n < 0 || n >= 10 {
		t.Fatalf("IntN(10) = %d", n)
	}
	// Two real environments are seeded apart.
	a, b := draw(env.Real().Rand), draw(env.Real().Rand)
	differ := false
	for i := range a {
		differ = differ || a[i] != b[i]
	}
	if !differ {
		t.Fatal("two Real() sources drew the same sequence")
	}
}

func TestOrReal(t *testing.T) {
	if e := (env.Env{}).OrReal(); e.Clock == nil || e.Rand == nil {
		t.Fatalf("zero Env's OrReal() = %+v: a part is unset", e)
	}
	fake := clockwork.NewFakeClock()
	r := env.NewRand(7)
	e := env.Env{Clock: fake, Rand: r}.OrReal()
	if e.Clock != fake || e.Rand != r {
		t.Fatal("OrReal replaced parts that were set")
	}
}
