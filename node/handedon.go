package node

import (
	"strings"
	"sync"
	"time"

	"github.com/bedwe/bedwe/node/journal"
	"github.com/bedwe/bedwe/pack"
)

// handedOnMemory is how long a holder remembers work it ran and handed on.
// A sender that missed the ack hands the same attempt again within
// seconds to minutes (its retries, or a taken refusal naming this peer);
// the memory outlives that by far, and is pruned with the retention.
const handedOnMemory = cancelMemory

// Node.handedOn remembers the held keys (workflow, step path,
// attempt) of work this peer ran and handed on, or dropped as superseded.
// A hand-off of the same attempt that arrives after the record was
// dropped — the sender's ack was lost and it tried again, or a second
// receiver refused it naming this peer (node/guard G8, join J6 and J8) —
// is answered as taken and not run again (I2), or refused as superseded
// when a guardian re-routed it meanwhile (I1). The set is journaled with
// the drop of the record (journal.BucketHandedOn), in the same
// transaction, so a restart keeps it.
//
// handedOnEntry is how a remembered attempt ended here, and the chain
// it belonged to (pack.Lineage): the same step and attempt handed here by
// another chain is not the one remembered.
type handedOnEntry struct {
	superseded bool
	lineage    pack.Lineage
}

// timedSet remembers a value per key with the time it was put, until
// expire forgets it (the handed-on memory, the unsettled refusals).
type timedSet[V any] struct {
	mu sync.Mutex
	m  map[string]timedValue[V]
}

// timedValue is a remembered value and when it was put.
type timedValue[V any] struct {
	at time.Time
	v  V
}

func newTimedSet[V any]() *timedSet[V] { return &timedSet[V]{m: map[string]timedValue[V]{}} }

// put remembers v for key, as of t.
func (s *timedSet[V]) put(key string, t time.Time, v V) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.m[key] = timedValue[V]{at: t, v: v}
}

// get returns what is remembered for key.
func (s *timedSet[V]) get(key string) (timedValue[V], bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	e, ok := s.m[key]
	return e, ok
}

// remove forgets key.
func (s *timedSet[V]) remove(key string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.m, key)
}

// expire forgets the keys put before cut and returns them.
func (s *timedSet[V]) expire(cut time.Time) []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []string
	for k, e := range s.m {
		if e.at.Before(cut) {
			out = append(out, k)
			delete(s.m, k)
		}
	}
	return out
}

// supersededMark prefixes the journaled time of a superseded attempt, and
// lineageMark the chain's lineage after it: "[superseded ]TIME[ lineage=L]".
const (
	supersededMark = "superseded "
	lineageMark    = " lineage="
)

// putHandedOn adds key, of the chain lineage, to the journal's handed-on
// set in tx.
func putHandedOn(tx *journal.Tx, key string, t time.Time, superseded bool, lineage pack.Lineage) error {
	v := t.UTC().Format(time.RFC3339Nano)
	if superseded {
		v = supersededMark + v
	}
	if l := lineage.String(); l != "" {
		v += lineageMark + l
	}
	return tx.Put(journal.BucketHandedOn, key, []byte(v))
}

// loadHandedOn reads the journal's handed-on set.
func (n *Node) loadHandedOn() error {
	return n.journal.ForEach(journal.BucketHandedOn, func(key string, value []byte) error {
		v, superseded := strings.CutPrefix(string(value), supersededMark)
		v, lin, _ := strings.Cut(v, lineageMark)
		t, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			t = n.clock.Now() // unreadable time: keep it one more memory
		}
		lineage, err := pack.ParseLineage(lin)
		if err != nil {
			n.log.Warn("handed-on memory: unreadable lineage, read as the first chain", "key", key, "err", err)
		}
		n.handedOn.put(key, t, handedOnEntry{superseded: superseded, lineage: lineage})
		return nil
	})
}

// pruneHandedOn forgets what was handed on before cut, in one transaction.
func (n *Node) pruneHandedOn(cut time.Time) (int, error) {
	keys := n.handedOn.expire(cut)
	if len(keys) == 0 {
		return 0, nil
	}
	err := n.journal.Update(func(tx *journal.Tx) error {
		for _, k := range keys {
			if err := tx.Delete(journal.BucketHandedOn, k); err != nil {
				return err
			}
		}
		return nil
	})
	return len(keys), err
}
