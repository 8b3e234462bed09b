package journal

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// blockLeader starts an Update whose function waits for release, so that
// Updates called meanwhile queue behind it and share the next commit. It
// returns once that function runs (the commit is in progress).
func blockLeader(t *testing.T, j *Journal) (release func(), done <-chan error) {
	t.Helper()
	running, gate, out := make(chan struct{}), make(chan struct{}), make(chan error, 1)
	go func() {
		out <- j.Update(func(tx *Tx) error {
			close(running)
			<-gate
			return tx.Put(BucketMeta, "leader", []byte("x"))
		})
	}()
	<-running
	return func() { close(gate) }, out
}

// waitPending waits until n Updates wait behind the leader.
func waitPending(j *Journal, n int) {
	for {
		j.group.mu.Lock()
		got := len(j.group.pending)
		j.group.mu.Unlock()
		if got >= n {
			return
		}
		runtimeGosched()
	}
}

// TestConcurrentUpdatesShareACommit: Updates that arrive while a commit
// runs are committed together, in one transaction (one fsync), and each
// is durable when its call returns.
func TestConcurrentUpdatesShareACommit(t *testing.T) {
	j, path := openTemp(t)
	release, leaderDone := blockLeader(t, j)
	const n = 8
	var wg sync.WaitGroup
	errs := make([]error, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			errs[i] = j.Update(func(tx *Tx) error { return tx.Put(BucketJoins, fmt.Sprint(i), []byte("v")) })
		}()
	}
	waitPending(j, n)
	release()
	wg.Wait()
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
	for i, err := range errs {
		if err != nil {
			t.Fatalf("update %d: %v", i, err)
		}
	}
	j.group.mu.Lock()
	shared := j.group.commits
	j.group.mu.Unlock()
	if shared != 1 {
		t.Fatalf("%d shared commits, want the %d queued updates in exactly one", shared, n)
	}
	j.Close()
	j2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if c, _ := j2.Count(BucketJoins); c != n {
		t.Fatalf("%d keys after reopening, want %d", c, n)
	}
}

// TestFailingUpdateDoesNotFailItsGroup: one function of a shared commit
// fails (an error, a panic): it alone gets its error (or its panic, in
// its own goroutine) and changes nothing; the others are committed.
func TestFailingUpdateDoesNotFailItsGroup(t *testing.T) {
	j, _ := openTemp(t)
	release, leaderDone := blockLeader(t, j)
	boom := errors.New("boom")
	var wg sync.WaitGroup
	var okErr, failErr error
	var panicked atomic.Bool
	var runs atomic.Int32
	wg.Add(3)
	go func() {
		defer wg.Done()
		okErr = j.Update(func(tx *Tx) error { runs.Add(1); return tx.Put(BucketJoins, "ok", []byte("v")) })
	}()
	go func() {
		defer wg.Done()
		failErr = j.Update(func(tx *Tx) error {
			if err := tx.Put(BucketJoins, "fail", []byte("v")); err != nil {
				return err
			}
			return boom
		})
	}()
	go func() {
		defer wg.Done()
		defer func() { panicked.Store(recover() != nil) }()
		_ = j.Update(func(tx *Tx) error {
			_ = tx.Put(BucketJoins, "panic", []byte("v"))
			panic("node bug")
		})
	}()
	waitPending(j, 3)
	release()
	wg.Wait()
	if err := <-leaderDone; err != nil {
		t.Fatal(err)
	}
	if okErr != nil || !errors.Is(failErr, boom) || !panicked.Load() {
		t.Fatalf("ok: %v, failing: %v (want %v), panic propagated to its caller: %v", okErr, failErr, boom, panicked.Load())
	}
	if _, ok, _ := j.Get(BucketJoins, "ok"); !ok {
		t.Fatal("the good update of the group was not committed")
	}
	for _, k := range []string{"fail", "panic"} {
		if _, ok, _ := j.Get(BucketJoins, k); ok {
			t.Fatalf("the failed update %q left its write", k)
		}
	}
	if r := runs.Load(); r < 1 || r > 2 {
		t.Fatalf("the good function ran %d times, want once or twice (in the abandoned group, then alone)", r)
	}
	// The lead moved on: the journal still takes writes.
	if err := j.Put(BucketMeta, "after", nil); err != nil {
		t.Fatal(err)
	}
}

func runtimeGosched() { runtime.Gosched() }

// TestLaterRidesTheNextUpdate: a write queued by Later commits with the
// next Update, before it (a delete queued first does not undo a put the
// Update makes after), and a failing one does not fail that Update.
func TestLaterRidesTheNextUpdate(t *testing.T) {
	j, path := openTemp(t)
	if err := j.Put(BucketJoins, "k", []byte("old")); err != nil {
		t.Fatal(err)
	}
	j.Later(func(tx *Tx) error { return tx.Delete(BucketJoins, "k") })
	j.Later(func(tx *Tx) error { return errors.New("boom") })
	j.Later(func(tx *Tx) error { return tx.Put(BucketJoins, "later", []byte("v")) })
	if err := j.Update(func(tx *Tx) error { return tx.Put(BucketJoins, "k", []byte("new")) }); err != nil {
		t.Fatalf("an Update after a failing Later: %v", err)
	}
	j.Close()
	j2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if v, ok, _ := j2.Get(BucketJoins, "k"); !ok || string(v) != "new" {
		t.Fatalf("k = %q (present %v) after reopening, want the Update's put after Later's delete", v, ok)
	}
	if _, ok, _ := j2.Get(BucketJoins, "later"); !ok {
		t.Fatal("the write queued by Later was not committed with the next Update")
	}
}

// TestLaterCommitsAloneWhenNothingElseDoes: with no Update after it, a
// write queued by Later is committed on its own within LaterFlush.
func TestLaterCommitsAloneWhenNothingElseDoes(t *testing.T) {
	j, _ := openTemp(t)
	done := make(chan struct{})
	j.Later(func(tx *Tx) error {
		defer close(done)
		return tx.Put(BucketJoins, "k", []byte("v"))
	})
	select {
	case <-done:
	case <-time.After(LaterFlush + 30*time.Second):
		t.Fatalf("a write queued by Later was not committed within %v", LaterFlush+30*time.Second)
	}
	// Its commit is over once a following Update returns (one lead at a time).
	if err := j.Put(BucketMeta, "after", nil); err != nil {
		t.Fatal(err)
	}
	if _, ok, _ := j.Get(BucketJoins, "k"); !ok {
		t.Fatal("the write queued by Later is not in the journal")
	}
}

// TestLaterCommittedOnClose: a clean stop loses no write queued by Later.
func TestLaterCommittedOnClose(t *testing.T) {
	j, path := openTemp(t)
	j.Later(func(tx *Tx) error { return tx.Put(BucketJoins, "k", []byte("v")) })
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	j2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if _, ok, _ := j2.Get(BucketJoins, "k"); !ok {
		t.Fatal("a write queued by Later was lost by Close")
	}
}
