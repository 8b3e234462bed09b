package journal

import (
	"bytes"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"
)

func openTemp(t testing.TB, opts ...Option) (*Journal, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "data", "journal.db")
	j, err := Open(path, opts...)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	t.Cleanup(func() { j.Close() })
	return j, path
}

func mustGet(t *testing.T, j *Journal, bucket, key string) []byte {
	t.Helper()
	v, ok, err := j.Get(bucket, key)
	if err != nil {
		t.Fatalf("Get(%s, %s): %v", bucket, key, err)
	}
	if !ok {
		t.Fatalf("Get(%s, %s): key absent", bucket, key)
	}
	return v
}

func TestPersistsAcrossCloseAndOpen(t *testing.T) {
	j, path := openTemp(t)
	for i, b := range Buckets() {
		if err := j.Put(b, "k", []byte(fmt.Sprintf("v%d", i))); err != nil {
			t.Fatalf("Put(%s): %v", b, err)
		}
	}
	if err := j.Put(BucketPacks, "gone", []byte("x")); err != nil {
		t.Fatal(err)
	}
	if err := j.Delete(BucketPacks, "gone"); err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatalf("Close: %v", err)
	}

	j2, err := Open(path)
	if err != nil {
		t.Fatalf("reopen: %v", err)
	}
	defer j2.Close()
	for i, b := range Buckets() {
		if got, want := mustGet(t, j2, b, "k"), fmt.Sprintf("v%d", i); string(got) != want {
			t.Errorf("%s/k = %q, want %q", b, got, want)
		}
	}
	if _, ok, _ := j2.Get(BucketPacks, "gone"); ok {
		t.Error("deleted key came back after reopen")
	}
	if got := mustGet(t, j2, BucketMeta, FormatKey); string(got) != FormatVersion {
		t.Errorf("format = %q, want %q", got, FormatVersion)
	}
}

func TestGetAbsentAndEmptyValues(t *testing.T) {
	j, _ := openTemp(t)
	if v, ok, err := j.Get(BucketPackBytes, "nope"); v != nil || ok || err != nil {
		t.Errorf("Get(absent) = %v, %v, %v; want nil, false, nil", v, ok, err)
	}
	if err := j.Put(BucketPackBytes, "empty", nil); err != nil {
		t.Fatal(err)
	}
	if v := mustGet(t, j, BucketPackBytes, "empty"); len(v) != 0 {
		t.Errorf("empty value = %q", v)
	}
	if err := j.Delete(BucketPackBytes, "never-there"); err != nil {
		t.Errorf("Delete(absent) = %v", err)
	}
}

func TestValuesAreCopies(t *testing.T) {
	j, _ := openTemp(t)
	in := []byte("original")
	if err := j.Put(BucketPacks, "a", in); err != nil {
		t.Fatal(err)
	}
	in[0] = 'X'
	got := mustGet(t, j, BucketPacks, "a")
	if string(got) != "original" {
		t.Fatalf("stored value changed with the caller's slice: %q", got)
	}
	got[0] = 'Y'
	var kept [][]byte
	if err := j.ForEach(BucketPacks, func(_ string, v []byte) error { kept = append(kept, v); return nil }); err != nil {
		t.Fatal(err)
	}
	// Values kept from ForEach stay valid after the transaction and after
	// more writes move pages around.
	for i := range 200 {
		if err := j.Put(BucketPacks, fmt.Sprintf("fill%03d", i), bytes.Repeat([]byte{'f'}, 4096)); err != nil {
			t.Fatal(err)
		}
	}
	if string(kept[0]) != "original" || string(mustGet(t, j, BucketPacks, "a")) != "original" {
		t.Fatalf("values are not independent copies: kept %q", kept[0])
	}
}

func TestUpdateIsAtomic(t *testing.T) {
	j, path := openTemp(t)
	boom := errors.New("boom")
	err := j.Update(func(tx *Tx) error {
		for _, k := range []string{"a", "b", "c"} {
			if err := tx.Put(BucketJoins, k, []byte(k)); err != nil {
				return err
			}
		}
		// Inside the transaction its own writes are visible.
		if _, ok, _ := tx.Get(BucketJoins, "b"); !ok {
			t.Error("write not visible inside its transaction")
		}
		return boom
	})
	if !errors.Is(err, boom) {
		t.Fatalf("Update error = %v, want %v", err, boom)
	}
	if n, _ := j.Count(BucketJoins); n != 0 {
		t.Fatalf("failed Update left %d keys", n)
	}

	func() {
		defer func() {
			if r := recover(); r == nil {
				t.Error("panic in Update did not propagate")
			}
		}()
		_ = j.Update(func(tx *Tx) error {
			_ = tx.Put(BucketJoins, "p", []byte("p"))
			panic("node bug")
		})
	}()
	if n, _ := j.Count(BucketJoins); n != 0 {
		t.Fatalf("panicking Update left %d keys", n)
	}

	// Move a pack from packs to outbox in one step: both or neither.
	if err := j.Put(BucketPacks, "wf/0/0", []byte("pack")); err != nil {
		t.Fatal(err)
	}
	err = j.Update(func(tx *Tx) error {
		v, _, err := tx.Get(BucketPacks, "wf/0/0")
		if err != nil {
			return err
		}
		if err := tx.Put(BucketOutbox, "wf/0/0", v); err != nil {
			return err
		}
		return tx.Delete(BucketPacks, "wf/0/0")
	})
	if err != nil {
		t.Fatal(err)
	}
	j.Close()
	j2, err := Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer j2.Close()
	if _, ok, _ := j2.Get(BucketPacks, "wf/0/0"); ok {
		t.Error("pack still in packs after the move")
	}
	if got := mustGet(t, j2, BucketOutbox, "wf/0/0"); string(got) != "pack" {
		t.Errorf("outbox value = %q", got)
	}
}

func TestViewIsReadOnly(t *testing.T) {
	j, _ := openTemp(t)
	err := j.View(func(tx *Tx) error {
		if tx.Writable() {
			t.Error("View transaction is writable")
		}
		return tx.Put(BucketMeta, "k", []byte("v"))
	})
	if err == nil {
		t.Fatal("Put inside View succeeded")
	}
}

func TestForEachOrderAndPrefix(t *testing.T) {
	j, _ := openTemp(t)
	keys := []string{
		PackKey("wfB", "0", 0),
		PackKey("wfA", "2.1/0", 10),
		PackKey("wfA", "2.1/0", 2),
		PackKey("wfA", "1", 0),
		PackKey("wfAB", "0", 0),
	}
	for _, k := range keys {
		if err := j.Put(BucketPacks, k, []byte(k)); err != nil {
			t.Fatal(err)
		}
	}
	var got []string
	err := j.ForEach(BucketPacks, func(k string, v []byte) error {
		if string(v) != k {
			t.Errorf("value of %s = %q", k, v)
		}
		got = append(got, k)
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	want := []string{
		"wfA/1/0000000000",
		"wfA/2.1/0/0000000002",
		"wfA/2.1/0/0000000010",
		"wfAB/0/0000000000",
		"wfB/0/0000000000",
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("ForEach order = %q, want %q", got, want)
	}

	got = nil
	if err := j.ForEachPrefix(BucketPacks, WorkflowPrefix("wfA"), func(k string, _ []byte) error {
		got = append(got, k)
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, want[:3]) {
		t.Errorf("ForEachPrefix(wfA/) = %q, want %q (not wfAB)", got, want[:3])
	}

	stop := errors.New("stop")
	n := 0
	err = j.ForEach(BucketPacks, func(string, []byte) error { n++; return stop })
	if !errors.Is(err, stop) || n != 1 {
		t.Errorf("ForEach after an fn error: err %v, %d calls; want stop after 1", err, n)
	}
	if c, err := j.Count(BucketPacks); c != len(keys) || err != nil {
		t.Errorf("Count = %d, %v; want %d", c, err, len(keys))
	}
}

func TestUnknownBucketAndBadKeys(t *testing.T) {
	j, _ := openTemp(t)
	checks := map[string]error{
		"Put":    j.Put("pakcs", "k", nil),
		"Delete": j.Delete("nope", "k"),
		"ForEach": j.ForEach("", func(string, []byte) error {
			return nil
		}),
	}
	_, _, checks["Get"] = j.Get("Packs", "k")
	_, checks["Count"] = j.Count("x")
	for op, err := range checks {
		if !errors.Is(err, ErrUnknownBucket) {
			t.Errorf("%s on an unknown bucket: err = %v, want ErrUnknownBucket", op, err)
		}
	}
	if err := j.Put(BucketPacks, "", []byte("v")); err == nil || !strings.Contains(err.Error(), "packs") {
		t.Errorf("Put with an empty key: err = %v, want an error naming the bucket", err)
	}
}

func TestConcurrentUse(t *testing.T) {
	j, _ := openTemp(t, WithoutSync())
	const writers, perWriter = 4, 50
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(2)
		go func() {
			defer wg.Done()
			for i := range perWriter {
				k := fmt.Sprintf("w%d-%03d", w, i)
				var err error
				if i%2 == 0 {
					err = j.Put(BucketOutbox, k, []byte(k))
				} else {
					err = j.Batch(func(tx *Tx) error { return tx.Put(BucketOutbox, k, []byte(k)) })
				}
				if err != nil {
					t.Error(err)
					return
				}
				if v, ok, err := j.Get(BucketOutbox, k); err != nil || !ok || string(v) != k {
					t.Errorf("read own write %s: %q, %v, %v", k, v, ok, err)
					return
				}
			}
		}()
		go func() { // a reader scanning while writers write
			defer wg.Done()
			for range perWriter / 5 {
				prev := ""
				err := j.ForEach(BucketOutbox, func(k string, v []byte) error {
					if k <= prev || string(v) != k {
						return fmt.Errorf("scan saw %q=%q after %q", k, v, prev)
					}
					prev = k
					return nil
				})
				if err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	if n, err := j.Count(BucketOutbox); n != writers*perWriter || err != nil {
		t.Fatalf("Count = %d, %v; want %d", n, err, writers*perWriter)
	}
}

func TestOpenLockedFailsWithinTimeout(t *testing.T) {
	j, path := openTemp(t)
	start := time.Now()
	_, err := Open(path, WithLockTimeout(100*time.Millisecond))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("second Open: err = %v, want ErrLocked", err)
	}
	if !strings.Contains(err.Error(), "locked by another bedwe node?") || !strings.Contains(err.Error(), path) {
		t.Errorf("error %q should name the file and the likely cause", err)
	}
	// Not a speed target: only a guard against waiting forever.
	if waited := time.Since(start); waited > time.Minute {
		t.Errorf("Open waited %v", waited)
	}
	j.Close()
	j2, err := Open(path, WithLockTimeout(100*time.Millisecond))
	if err != nil {
		t.Fatalf("Open after the holder closed: %v", err)
	}
	j2.Close()
}

// writeJournal creates a journal with n 4 KiB packs and returns its path.
func writeJournal(t *testing.T, n int) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "journal.db")
	j, err := Open(path, WithoutSync())
	if err != nil {
		t.Fatal(err)
	}
	err = j.Update(func(tx *Tx) error {
		for i := range n {
			if err := tx.Put(BucketPacks, PackKey("wf", fmt.Sprint(i), 0), bytes.Repeat([]byte{byte(i)}, 4096)); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := j.Close(); err != nil {
		t.Fatal(err)
	}
	return path
}

func TestOpenDamagedFile(t *testing.T) {
	// Fixed pseudo-random bytes: the same damage on every run.
	random := make([]byte, 64<<10)
	rand.NewChaCha8([32]byte{'b', 'e', 'd', 'w', 'e'}).Read(random)
	overwrite := func(data []byte, at int64) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			f, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer f.Close()
			if _, err := f.WriteAt(data, at); err != nil {
				t.Fatal(err)
			}
		}
	}
	truncate := func(size int64) func(t *testing.T, path string) {
		return func(t *testing.T, path string) {
			if err := os.Truncate(path, size); err != nil {
				t.Fatal(err)
			}
		}
	}
	tests := []struct {
		name   string
		damage func(t *testing.T, path string)
	}{
		{"text file", func(t *testing.T, path string) {
			if err := os.WriteFile(path, []byte(`{"not":"a journal"}`+"\n"), 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"random bytes", func(t *testing.T, path string) {
			if err := os.WriteFile(path, random, 0o600); err != nil {
				t.Fatal(err)
			}
		}},
		{"truncated to 100 bytes", truncate(100)},
		{"truncated to one page", truncate(4096)},
		{"truncated to two pages", truncate(8192)},
		{"truncated mid-file", truncate(100_000)},
		{"zeroed pages", overwrite(make([]byte, 64<<10), 16<<10)},
		{"random pages", overwrite(random, 16<<10)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeJournal(t, 200)
			tt.damage(t, path)
			for attempt := range 2 { // the second try must not find the file locked
				j, err := Open(path, WithLockTimeout(time.Second))
				if err == nil {
					j.Close()
					t.Fatalf("attempt %d: Open of a damaged journal succeeded", attempt)
				}
				if !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), path) {
					t.Fatalf("attempt %d: err = %v, want ErrCorrupt naming the file", attempt, err)
				}
			}
		})
	}
}

func TestOpenEmptyFileStartsFresh(t *testing.T) {
	// A crash right after the file was created leaves it empty.
	path := filepath.Join(t.TempDir(), "journal.db")
	if err := os.WriteFile(path, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	j, err := Open(path)
	if err != nil {
		t.Fatalf("Open(empty file): %v", err)
	}
	defer j.Close()
	if err := j.Put(BucketMeta, "k", []byte("v")); err != nil {
		t.Fatal(err)
	}
}

func TestOpenRejectsOtherFormat(t *testing.T) {
	j, path := openTemp(t)
	if err := j.Put(BucketMeta, FormatKey, []byte("99")); err != nil {
		t.Fatal(err)
	}
	j.Close()
	_, err := Open(path)
	if err == nil || !strings.Contains(err.Error(), `journal format "99"`) {
		t.Fatalf("Open of a format-99 journal: err = %v", err)
	}
}

func TestOpenFailsOnBadDirectory(t *testing.T) {
	dir := t.TempDir()
	blocker := filepath.Join(dir, "file")
	if err := os.WriteFile(blocker, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := Open(filepath.Join(blocker, "journal.db"))
	if err == nil || !strings.Contains(err.Error(), "open journal") {
		t.Fatalf("err = %v, want an open journal error", err)
	}
}

func TestUseAfterClose(t *testing.T) {
	j, _ := openTemp(t)
	j.Close()
	if err := j.Put(BucketMeta, "k", []byte("v")); err == nil {
		t.Fatal("Put after Close succeeded")
	}
}

// TestObserverTimesWrites: WithObserver is told of every write (Put,
// Delete, Update, Batch, a failed one too) and of no read.
func TestObserverTimesWrites(t *testing.T) {
	var mu sync.Mutex
	ops := map[string]int{}
	j, _ := openTemp(t, WithObserver(func(op string, d time.Duration) {
		if d < 0 {
			t.Errorf("negative duration %s", d)
		}
		mu.Lock()
		ops[op]++
		mu.Unlock()
	}))
	if err := j.Put(BucketMeta, "a", []byte("1")); err != nil {
		t.Fatal(err)
	}
	if err := j.Delete(BucketMeta, "a"); err != nil {
		t.Fatal(err)
	}
	if err := j.Update(func(tx *Tx) error { return errors.New("no") }); err == nil {
		t.Fatal("Update returned no error")
	}
	if err := j.Batch(func(tx *Tx) error { return tx.Put(BucketMeta, "b", nil) }); err != nil {
		t.Fatal(err)
	}
	if _, _, err := j.Get(BucketMeta, "b"); err != nil {
		t.Fatal(err)
	}
	if _, err := j.Count(BucketMeta); err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	if ops[OpUpdate] != 3 || ops[OpBatch] != 1 || len(ops) != 2 {
		t.Fatalf("observed %v, want 3 updates and 1 batch", ops)
	}
}

func TestPeekReadsInPlace(t *testing.T) {
	j, _ := openTemp(t)
	if err := j.Put(BucketPacks, "a", []byte("stored")); err != nil {
		t.Fatal(err)
	}
	errStop := errors.New("stop")
	err := j.View(func(tx *Tx) error {
		called := false
		ok, err := tx.Peek(BucketPacks, "absent", func([]byte) error { called = true; return nil })
		if ok || err != nil || called {
			t.Errorf("Peek(absent) = %v, %v, fn called %v; want false, nil, not called", ok, err, called)
		}
		var seen string
		ok, err = tx.Peek(BucketPacks, "a", func(v []byte) error { seen = string(v); return nil })
		if !ok || err != nil || seen != "stored" {
			t.Errorf("Peek(a) = %v, %v, saw %q; want true, nil, \"stored\"", ok, err, seen)
		}
		if _, err := tx.Peek(BucketPacks, "a", func([]byte) error { return errStop }); !errors.Is(err, errStop) {
			t.Errorf("Peek's fn error = %v; want %v", err, errStop)
		}
		if _, err := tx.Peek("no-such-bucket", "a", func([]byte) error { return nil }); err == nil {
			t.Error("Peek(unknown bucket) = nil error")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}
