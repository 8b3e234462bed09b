package node

import "sync"

// table is a map of per-record slots (join copies, guard slots, held work,
// workflow records) by key. Its lock guards the map only: it is never
// held across I/O, nor while a slot's own lock is taken, so a slot's
// journal write never blocks a lookup of another.
type table[S comparable] struct {
	mu sync.Mutex
	m  map[string]S
}

func newTable[S comparable]() table[S] { return table[S]{m: map[string]S{}} }

// get returns key's slot.
func (t *table[S]) get(key string) (S, bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	s, ok := t.m[key]
	return s, ok
}

// getOrAdd returns key's slot, adding mk() when there is none; added says
// which.
func (t *table[S]) getOrAdd(key string, mk func() S) (s S, added bool) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if s, ok := t.m[key]; ok {
		return s, false
	}
	s = mk()
	t.m[key] = s
	return s, true
}

// set stores s as key's slot.
func (t *table[S]) set(key string, s S) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.m[key] = s
}

// removeIf drops key's slot if it is still s.
func (t *table[S]) removeIf(key string, s S) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.m[key] == s {
		delete(t.m, key)
	}
}

// values returns every slot (a snapshot).
func (t *table[S]) values() []S {
	t.mu.Lock()
	defer t.mu.Unlock()
	out := make([]S, 0, len(t.m))
	for _, s := range t.m {
		out = append(out, s)
	}
	return out
}

// len returns the number of slots.
func (t *table[S]) len() int {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.m)
}
