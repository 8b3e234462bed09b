//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package journal

import (
	"errors"
	"os"
	"syscall"
	"testing"
	"time"
)

func TestOpenInconsistentButLockedReportsLock(t *testing.T) {
	// Another process holds the file and its header looks inconsistent
	// (as it can mid-write): the lock is what Open must report.
	path := writeJournal(t, 50)
	if err := os.Truncate(path, 8192); err != nil {
		t.Fatal(err)
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		t.Fatal(err)
	}
	_, err = Open(path, WithLockTimeout(50*time.Millisecond))
	if !errors.Is(err, ErrLocked) {
		t.Fatalf("err = %v, want ErrLocked", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_UN); err != nil {
		t.Fatal(err)
	}
	if _, err = Open(path); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("after unlock: err = %v, want ErrCorrupt", err)
	}
}
