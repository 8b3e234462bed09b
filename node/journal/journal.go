// Package journal is a node's durable memory: a bbolt file in the node's
// data directory holding the packs it holds, the packs it handed off and
// still covers, join records, workflow records on the origin side, keys of
// deliveries already seen, and a little metadata. Every committed write is
// fsynced before the call returns, so a node that acked a pack still has it
// after a power cut. The one exception is asked for by name: a write
// queued with Later rides the next commit, for records whose loss to a
// crash the node can tell and repair after a restart.
//
// The journal stores opaque bytes under string keys in a fixed set of
// buckets. It never interprets values: the node encodes and decodes them,
// and this package knows nothing of packs, peers or the network.
package journal

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/jonboulle/clockwork"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Bucket names. Open creates all of them; any other name is an error.
const (
	// BucketPacks holds the state of packs this node has acked and must run
	// or forward (small, rewritten as the step advances). Keys come from
	// PackKey.
	BucketPacks = "packs"
	// BucketPackBytes holds the encoded pack of each entry of BucketPacks,
	// under the same key, written once (a pack grows along a workflow).
	BucketPackBytes = "pack-bytes"
	// BucketOutbox holds packs this node handed off and still covers (as
	// their guardian) until it is released. Keys come from StepKey: one
	// entry per step, whatever the attempt.
	BucketOutbox = "outbox"
	// BucketReleased holds tombstones of guard copies released (or
	// re-routed past), keyed by StepKey, so a guardian that restarts still
	// answers that the step moved on.
	BucketReleased = "released"
	// BucketJoins holds join records (and replicas of them) for patterns
	// this node joins, keyed by join ID.
	BucketJoins = "joins"
	// BucketWorkflows holds origin-side workflow records (and replicas of
	// them): status, result, trace; keyed by workflow ID.
	BucketWorkflows = "workflows"
	// BucketMeta holds small node-wide values (identity, schedule, format).
	BucketMeta = "meta"
	// BucketHandedOn remembers work this node ran and handed on (held
	// key → time, RFC 3339), so that the same attempt handed here again is
	// answered as taken and not run twice; forgotten after a while.
	BucketHandedOn = "handed-on"
	// BucketStash holds what a running workflow's chains dropped from
	// their packs (origin O6), one entry per stashed output or run of
	// trace entries, keyed by workflow ID first; the workflow's record in
	// BucketWorkflows does not repeat them.
	BucketStash = "stash"
)

// Buckets returns every bucket name, in a fixed order.
func Buckets() []string {
	return []string{BucketPacks, BucketPackBytes, BucketOutbox, BucketReleased, BucketJoins, BucketWorkflows, BucketMeta, BucketHandedOn, BucketStash}
}

// FormatVersion is the layout version recorded in BucketMeta under
// FormatKey. Open refuses a journal written with another version.
// Version 2: keys from PackKey and StepKey, pack bytes in their own
// bucket, join records of package node/join.
const FormatVersion = "2"

// FormatKey is the BucketMeta key that holds FormatVersion.
const FormatKey = "journal.format"

// DefaultLockTimeout is how long Open waits for another process to release
// the journal file before giving up.
const DefaultLockTimeout = 2 * time.Second

var (
	// ErrLocked is returned by Open when another process holds the file.
	ErrLocked = errors.New("journal is locked by another bedwe node?")
	// ErrCorrupt is returned by Open when the file is damaged or is not a
	// journal at all.
	ErrCorrupt = errors.New("journal file is damaged or not a bedwe journal")
	// ErrUnknownBucket is returned for a bucket name not in Buckets.
	ErrUnknownBucket = errors.New("unknown journal bucket")
)

// Journal is an open journal file. It is safe for concurrent use: reads run
// in parallel, writes are serialised by bbolt, and each write commit is
// fsynced before it returns.
type Journal struct {
	db    *bolt.DB
	path  string
	group groupCommit
	// observe, when set, is told how long each write (Update, Batch, and
	// so Put and Delete) took, commit and fsync included (WithObserver).
	observe func(op string, d time.Duration)
	// clock times the writes observed and the flush of Later's writes
	// (WithClock).
	clock clockwork.Clock
}

// Option configures Open.
type Option func(*config)

type config struct {
	lockTimeout time.Duration
	noSync      bool
	observe     func(op string, d time.Duration)
	clock       clockwork.Clock
}

// Write operations an observer is told about (WithObserver).
const (
	// OpUpdate is an Update (Put and Delete are Updates).
	OpUpdate = "update"
	// OpBatch is a Batch call, whose commit may be shared.
	OpBatch = "batch"
)

// WithObserver has fn told the duration of every write call, commit and
// fsync included, failed ones too: op is OpUpdate or OpBatch. fn runs on
// the writer's goroutine after the write returned and must be quick and
// safe for concurrent use (the node feeds a Prometheus histogram).
func WithObserver(fn func(op string, d time.Duration)) Option {
	return func(c *config) { c.observe = fn }
}

// WithClock times the writes told to the observer and the wait of Later's
// writes (LaterFlush) on clock instead of the wall clock (a simulated
// node's clock). Nil means the wall clock. The file lock's timeout
// (WithLockTimeout) stays on the wall clock: bbolt waits for it.
func WithClock(clock clockwork.Clock) Option {
	return func(c *config) {
		if clock != nil {
			c.clock = clock
		}
	}
}

// WithLockTimeout sets how long Open waits for the file lock (default
// DefaultLockTimeout). Values <= 0 mean the default: Open never waits
// forever.
func WithLockTimeout(d time.Duration) Option {
	return func(c *config) {
		if d > 0 {
			c.lockTimeout = d
		}
	}
}

// WithoutSync skips fsync on commit. A crash can then lose or tear recent
// writes, which breaks bedwe's hand-off guarantee: use it only in tests and
// benchmarks that do not simulate power loss.
func WithoutSync() Option {
	return func(c *config) { c.noSync = true }
}

// Open opens or creates the journal at path, creating parent directories
// (mode 0700) as needed, and checks the whole file for damage. It waits at
// most the lock timeout for another process to release the file and then
// fails with ErrLocked; a damaged file fails with ErrCorrupt.
func Open(path string, opts ...Option) (*Journal, error) {
	cfg := config{lockTimeout: DefaultLockTimeout, clock: clockwork.NewRealClock()}
	for _, o := range opts {
		o(&cfg)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
	if err := preflight(path); err != nil {
		// A node writing the file right now can make its header look
		// inconsistent for a moment; then the lock is the real problem.
		if lockedElsewhere(path) {
			return nil, fmt.Errorf("open journal %s: %w", path, ErrLocked)
		}
		return nil, fmt.Errorf("open journal %s: %w: %w", path, ErrCorrupt, err)
	}
	db, err := openBolt(path, cfg)
	if err != nil {
		return nil, err
	}
	j := &Journal{db: db, path: path, observe: cfg.observe, clock: cfg.clock}
	if err := j.init(); err != nil {
		db.Close()
		return nil, err
	}
	return j, nil
}

// openBolt opens the bbolt file, turning bbolt's panics on damaged files
// into ErrCorrupt. After such a panic it unlocks and closes the file so a
// later Open reports the damage again rather than a lock; the mapping bbolt
// made of the damaged file stays until the process exits.
func openBolt(path string, cfg config) (db *bolt.DB, err error) {
	var file *os.File
	defer func() {
		if r := recover(); r != nil {
			if file != nil {
				unlockFile(file)
				file.Close()
			}
			db, err = nil, fmt.Errorf("open journal %s: %w: %v", path, ErrCorrupt, r)
		}
	}()
	db, err = bolt.Open(path, 0o600, &bolt.Options{
		Timeout: cfg.lockTimeout,
		NoSync:  cfg.noSync,
		OpenFile: func(name string, flag int, perm os.FileMode) (*os.File, error) {
			f, err := os.OpenFile(name, flag, perm)
			file = f
			return f, err
		},
	})
	switch {
	case err == nil:
		return db, nil
	case errors.Is(err, berrors.ErrTimeout):
		return nil, fmt.Errorf("open journal %s: %w (still locked after %s)", path, ErrLocked, cfg.lockTimeout)
	case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrChecksum),
		errors.Is(err, berrors.ErrVersionMismatch), strings.Contains(err.Error(), "file size too small"):
		return nil, fmt.Errorf("open journal %s: %w: %w", path, ErrCorrupt, err)
	default:
		var pe *fs.PathError
		if errors.As(err, &pe) {
			return nil, fmt.Errorf("open journal: %w", err)
		}
		return nil, fmt.Errorf("open journal %s: %w", path, err)
	}
}

// init checks every page of the file, creates missing buckets and checks or
// records the format version.
func (j *Journal) init() error {
	err := j.db.View(func(tx *bolt.Tx) error {
		for cerr := range tx.Check() {
			return cerr
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("open journal %s: %w: %w", j.path, ErrCorrupt, err)
	}
	err = j.db.Update(func(tx *bolt.Tx) error {
		for _, name := range Buckets() {
			if _, err := tx.CreateBucketIfNotExists([]byte(name)); err != nil {
				return fmt.Errorf("create bucket %s: %w", name, err)
			}
		}
		meta := tx.Bucket([]byte(BucketMeta))
		switch v := meta.Get([]byte(FormatKey)); {
		case v == nil:
			return meta.Put([]byte(FormatKey), []byte(FormatVersion))
		case string(v) != FormatVersion:
			return fmt.Errorf("journal format %q, this bedwe reads format %q: it was written by another bedwe version; run that version until its work has drained, or move the journal aside (what it holds is lost)", v, FormatVersion)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("open journal %s: %w", j.path, err)
	}
	return nil
}

// Path returns the journal's file path.
func (j *Journal) Path() string { return j.path }

// Close commits the writes queued by Later, waits for running
// transactions and closes the file. Using the journal after Close returns
// errors.
func (j *Journal) Close() error {
	j.group.mu.Lock()
	queued := len(j.group.later) > 0
	j.group.mu.Unlock()
	if queued {
		_ = j.Update(func(*Tx) error { return nil }) // takes them
	}
	if err := j.db.Close(); err != nil {
		return fmt.Errorf("close journal %s: %w", j.path, err)
	}
	return nil
}

// Put stores value under key in bucket and returns once it is on disk.
func (j *Journal) Put(bucket, key string, value []byte) error {
	return j.Update(func(tx *Tx) error { return tx.Put(bucket, key, value) })
}

// Get returns a copy of the value under key in bucket; ok is false when the
// key is absent.
func (j *Journal) Get(bucket, key string) (value []byte, ok bool, err error) {
	err = j.View(func(tx *Tx) error {
		value, ok, err = tx.Get(bucket, key)
		return err
	})
	return value, ok, err
}

// Peek calls fn with the value under key in bucket without copying it:
// the value is valid only during fn, which must neither change nor keep
// it. ok is false, and fn is not called, when the key is absent. It is Get
// for a reader that needs a field of a large value, not the value.
func (t *Tx) Peek(bucket, key string, fn func(value []byte) error) (ok bool, err error) {
	b, err := t.bucket(bucket)
	if err != nil {
		return false, err
	}
	v := b.Get([]byte(key))
	if v == nil {
		return false, nil
	}
	return true, fn(v)
}

// Delete removes key from bucket; removing an absent key is not an error.
func (j *Journal) Delete(bucket, key string) error {
	return j.Update(func(tx *Tx) error { return tx.Delete(bucket, key) })
}

// ForEach calls fn for every key in bucket in byte order of the keys, with
// a copy of each value, inside one read transaction: fn sees a consistent
// snapshot. It stops at fn's first error and returns it.
//
// fn must not write to the journal (Put, Update, ...): a write that needs
// to grow the file waits for the read transaction, which waits for fn.
// Collect what to change and write after ForEach returns.
func (j *Journal) ForEach(bucket string, fn func(key string, value []byte) error) error {
	return j.View(func(tx *Tx) error { return tx.ForEach(bucket, fn) })
}

// ForEachPrefix is ForEach restricted to keys starting with prefix.
func (j *Journal) ForEachPrefix(bucket, prefix string, fn func(key string, value []byte) error) error {
	return j.View(func(tx *Tx) error { return tx.ForEachPrefix(bucket, prefix, fn) })
}

// Count returns the number of keys in bucket.
func (j *Journal) Count(bucket string) (n int, err error) {
	err = j.View(func(tx *Tx) error {
		n, err = tx.Count(bucket)
		return err
	})
	return n, err
}

// Update runs fn in a read-write transaction. If fn returns nil every change
// commits atomically and is fsynced before Update returns; if fn returns an
// error or panics, nothing changes (and the panic goes on up).
//
// Updates that arrive while another commit is in progress share the next
// commit and its fsync (group commit, see commitGroup); a lone writer
// commits at once and waits for nobody. Within a shared
// commit the functions run in arrival order. If one of them fails, the
// shared commit is abandoned and every function runs again in a
// transaction of its own, so fn may run twice: it must only read and
// write through tx (every writer in the node does).
func (j *Journal) Update(fn func(tx *Tx) error) error {
	defer j.timed(OpUpdate, j.clock.Now())
	c := &writeCall{fn: fn, wake: make(chan struct{})}
	j.group.mu.Lock()
	j.group.pending = append(j.group.pending, c)
	if j.group.leading {
		j.group.mu.Unlock()
		<-c.wake
	} else {
		j.group.leading = true
		j.group.mu.Unlock()
		c.lead = true
	}
	if c.lead {
		j.lead()
	}
	if c.alone {
		return j.update(fn)
	}
	return c.err
}

// update runs fn in a transaction of its own.
func (j *Journal) update(fn func(tx *Tx) error) error {
	if err := j.db.Update(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx}) }); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

// writeCall is one Update waiting in the group commit.
type writeCall struct {
	fn   func(tx *Tx) error
	wake chan struct{} // closed when done, or when it is to lead
	err  error
	// lead: this call commits the pending calls (itself first among
	// them); alone: the shared commit failed, run fn by itself.
	lead, alone bool
}

// groupCommit queues the Updates that arrive while a commit runs.
type groupCommit struct {
	mu      sync.Mutex
	pending []*writeCall
	leading bool // a caller is committing; the others wait in pending
	commits int  // shared commits of more than one call (for tests)
	// later are the writes queued by Later, run first in the next
	// commit; laterArmed: a flush of them is scheduled.
	later      []func(tx *Tx) error
	laterArmed bool
}

// LaterFlush is how long a write queued by Later waits for another
// commit to join before it is committed by itself.
const LaterFlush = 2 * time.Second

// Later queues fn to run, first, in the next commit of an Update (or on
// its own after LaterFlush if none comes): a write that nobody waits for
// and that is safe to lose to a crash, such as the end of a record the
// node can tell is stale after a restart. It costs no commit and no fsync
// of its own on a busy journal. fn must only read and write through tx;
// its error, or a commit that fails, drops it (it runs alone once more
// when a shared commit fails). Writes queued later run after it, and
// before any write queued by an Update called after Later returned.
func (j *Journal) Later(fn func(tx *Tx) error) {
	j.group.mu.Lock()
	j.group.later = append(j.group.later, fn)
	arm := !j.group.laterArmed
	j.group.laterArmed = true
	j.group.mu.Unlock()
	if arm {
		j.clock.AfterFunc(LaterFlush, j.flushLater)
	}
}

// flushLater commits the writes queued by Later that no commit took.
func (j *Journal) flushLater() {
	j.group.mu.Lock()
	j.group.laterArmed = false
	none := len(j.group.later) == 0
	j.group.mu.Unlock()
	if !none {
		_ = j.Update(func(*Tx) error { return nil }) // takes them; fails only once closed
	}
}

// lead commits every pending call (the leader's own among them) in one
// transaction, then hands the lead to the first call that arrived
// meanwhile, so that no caller commits for others for ever.
func (j *Journal) lead() {
	j.group.mu.Lock()
	batch, later := j.group.pending, j.group.later
	j.group.pending, j.group.later = nil, nil
	j.group.mu.Unlock()
	// Deferred: a panic of the leader's own function (a batch of one)
	// goes up to its caller, and the lead moves on all the same.
	defer j.handOn(batch)
	j.commitGroup(batch, later)
}

// handOn wakes the calls of batch other than the leader's and hands the
// lead to the first call pending, if any.
func (j *Journal) handOn(batch []*writeCall) {
	j.group.mu.Lock()
	if len(j.group.pending) > 0 {
		next := j.group.pending[0]
		next.lead = true
		close(next.wake)
	} else {
		j.group.leading = false
	}
	j.group.mu.Unlock()
	for _, c := range batch[1:] {
		close(c.wake)
	}
}

// errGroupFn abandons a shared commit in which a function failed.
var errGroupFn = errors.New("a function of a shared commit failed")

// commitGroup runs later (the writes queued by Later) and batch in one
// transaction. A batch of one with nothing queued (the leader alone, the
// common case) runs as a plain Update, in its caller's goroutine. In a
// larger one a function that fails or panics abandons the commit: every
// call then runs alone (alone), each in its caller's goroutine, where an
// error or a panic belongs, after each queued write ran alone here.
func (j *Journal) commitGroup(batch []*writeCall, later []func(tx *Tx) error) {
	if len(batch) == 1 && len(later) == 0 {
		batch[0].err = j.update(batch[0].fn)
		return
	}
	err := j.db.Update(func(btx *bolt.Tx) error {
		tx := &Tx{tx: btx}
		for _, fn := range later {
			if !runRecovered(fn, tx) {
				return errGroupFn
			}
		}
		for _, c := range batch {
			if !runRecovered(c.fn, tx) {
				return errGroupFn
			}
		}
		return nil
	})
	if err != nil {
		for _, fn := range later {
			_ = j.db.Update(func(btx *bolt.Tx) error {
				if !runRecovered(fn, &Tx{tx: btx}) {
					return errGroupFn
				}
				return nil
			})
		}
		for _, c := range batch {
			c.alone = true
		}
		return
	}
	if len(batch) > 1 {
		j.group.mu.Lock()
		j.group.commits++
		j.group.mu.Unlock()
	}
}

// runRecovered runs fn, reporting whether it returned nil without
// panicking.
func runRecovered(fn func(tx *Tx) error, tx *Tx) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	return fn(tx) == nil
}

// timed tells the observer, if any, how long op took since start.
func (j *Journal) timed(op string, start time.Time) {
	if j.observe != nil {
		j.observe(op, j.clock.Since(start))
	}
}

// View runs fn in a read-only transaction over a consistent snapshot. The
// rule of ForEach applies: fn must not write to the journal.
func (j *Journal) View(fn func(tx *Tx) error) error {
	if err := j.db.View(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx}) }); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

// Batch is Update for many concurrent small writers: calls from different
// goroutines that arrive together share one commit and one fsync, which
// multiplies write throughput. The price: fn may run more than once (when
// another fn in the same batch fails), so it must be idempotent and must
// not depend on side effects outside the transaction. Batch returns once
// the shared commit is on disk.
func (j *Journal) Batch(fn func(tx *Tx) error) error {
	defer j.timed(OpBatch, j.clock.Now())
	if err := j.db.Batch(func(btx *bolt.Tx) error { return fn(&Tx{tx: btx}) }); err != nil {
		return fmt.Errorf("journal %s: %w", j.path, err)
	}
	return nil
}

// Tx is a journal transaction, valid only inside the Update, View or Batch
// callback that received it. Writes on a read-only Tx fail.
type Tx struct {
	tx *bolt.Tx
}

// Writable reports whether the transaction may write.
func (t *Tx) Writable() bool { return t.tx.Writable() }

func (t *Tx) bucket(name string) (*bolt.Bucket, error) {
	if !slices.Contains(Buckets(), name) {
		return nil, fmt.Errorf("%w %q", ErrUnknownBucket, name)
	}
	b := t.tx.Bucket([]byte(name))
	if b == nil {
		return nil, fmt.Errorf("bucket %q missing from the journal file", name)
	}
	return b, nil
}

// Put stores value under key in bucket.
func (t *Tx) Put(bucket, key string, value []byte) error {
	b, err := t.bucket(bucket)
	if err != nil {
		return err
	}
	if value == nil {
		value = []byte{}
	}
	if err := b.Put([]byte(key), value); err != nil {
		return fmt.Errorf("put %s/%q: %w", bucket, key, err)
	}
	return nil
}

// Get returns a copy of the value under key in bucket; ok is false when the
// key is absent.
func (t *Tx) Get(bucket, key string) (value []byte, ok bool, err error) {
	b, err := t.bucket(bucket)
	if err != nil {
		return nil, false, err
	}
	v := b.Get([]byte(key))
	if v == nil {
		return nil, false, nil
	}
	return slices.Clone(v), true, nil
}

// Delete removes key from bucket; removing an absent key is not an error.
func (t *Tx) Delete(bucket, key string) error {
	b, err := t.bucket(bucket)
	if err != nil {
		return err
	}
	if err := b.Delete([]byte(key)); err != nil {
		return fmt.Errorf("delete %s/%q: %w", bucket, key, err)
	}
	return nil
}

// PutIfAbsent stores value under key unless the key exists, and reports
// whether it stored it.
func (t *Tx) PutIfAbsent(bucket, key string, value []byte) (bool, error) {
	b, err := t.bucket(bucket)
	if err != nil {
		return false, err
	}
	if b.Get([]byte(key)) != nil {
		return false, nil
	}
	if err := t.Put(bucket, key, value); err != nil {
		return false, err
	}
	return true, nil
}

// ForEach calls fn for every key in bucket in byte order, with a copy of
// each value, stopping at fn's first error.
func (t *Tx) ForEach(bucket string, fn func(key string, value []byte) error) error {
	return t.ForEachPrefix(bucket, "", fn)
}

// ForEachPrefix calls fn for every key in bucket that starts with prefix,
// in byte order, with a copy of each value, stopping at fn's first error.
func (t *Tx) ForEachPrefix(bucket, prefix string, fn func(key string, value []byte) error) error {
	b, err := t.bucket(bucket)
	if err != nil {
		return err
	}
	c := b.Cursor()
	p := []byte(prefix)
	for k, v := c.Seek(p); k != nil && bytes.HasPrefix(k, p); k, v = c.Next() {
		if err := fn(string(k), slices.Clone(v)); err != nil {
			return err
		}
	}
	return nil
}

// Count returns the number of keys in bucket.
func (t *Tx) Count(bucket string) (int, error) {
	b, err := t.bucket(bucket)
	if err != nil {
		return 0, err
	}
	n := 0
	c := b.Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		n++
	}
	return n, nil
}
