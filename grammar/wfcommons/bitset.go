package wfcommons

import "math/bits"

// bitRows is an n×n bit matrix stored in one slab: row i holds words
// [i*w, (i+1)*w). Bit j of row i is set when task position j is in the set
// of row i.
type bitRows struct {
	w    int // words per row
	slab []uint64
}

func newBitRows(n int) bitRows {
	w := (n + 63) / 64
	return bitRows{w: w, slab: make([]uint64, n*w)}
}

func (b bitRows) row(i int) []uint64 { return b.slab[i*b.w : (i+1)*b.w] }

func has(s []uint64, j int) bool { return s[j>>6]&(1<<(uint(j)&63)) != 0 }

func set(s []uint64, j int) { s[j>>6] |= 1 << (uint(j) & 63) }

func unset(s []uint64, j int) { s[j>>6] &^= 1 << (uint(j) & 63) }

func or(dst, src []uint64) {
	for i, v := range src {
		dst[i] |= v
	}
}

func count(s []uint64) int {
	n := 0
	for _, v := range s {
		n += bits.OnesCount64(v)
	}
	return n
}

// andCount counts the bits set in both a and b within words [lo, hi].
func andCount(a, b []uint64, lo, hi int) int {
	n := 0
	for i := lo; i <= hi; i++ {
		n += bits.OnesCount64(a[i] & b[i])
	}
	return n
}

// subset reports whether every bit of a is set in b.
func subset(a, b []uint64) bool {
	for i, v := range a {
		if v&^b[i] != 0 {
			return false
		}
	}
	return true
}
