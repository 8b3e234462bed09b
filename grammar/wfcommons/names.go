package wfcommons

import (
	"fmt"
	"strconv"
	"strings"

	"github.com/bedwe/bedwe/grammar"
)

// isNameByte reports whether c may appear in a service name as this package
// writes them: the ASCII part of the language's NAME charset.
func isNameByte(c byte) bool {
	return c == '_' || c == '-' || c == '.' ||
		'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9'
}

// checkPrefix rejects a service prefix with characters outside the NAME
// charset.
func checkPrefix(p string) error {
	for i := 0; i < len(p); i++ {
		if !isNameByte(p[i]) {
			return fmt.Errorf("service prefix %q: character %q is not allowed (use letters, digits, _ - .)", p, p[i])
		}
	}
	return nil
}

// sanitize maps a task name onto the NAME charset: every other character
// (including every byte of a non-ASCII one) becomes '_'.
func sanitize(s string) string {
	var b strings.Builder
	b.Grow(len(s))
	for i := 0; i < len(s); i++ {
		if c := s[i]; isNameByte(c) {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	return b.String()
}

// serviceNames gives every task a distinct service name: prefix + the
// sanitised task name (the id when the name is empty), cut to fit maxLen
// bytes (negative: no limit). A name that is a keyword gets a trailing '_';
// a clash gets _2, _3, ... in file order.
func serviceNames(inst *Instance, prefix string, maxLen int) []string {
	names := make([]string, len(inst.Tasks))
	used := make(map[string]bool, len(inst.Tasks))
	for i, t := range inst.Tasks {
		base := t.Name
		if base == "" {
			base = t.ID
		}
		base = prefix + sanitize(base)
		if base == "" {
			base = "task"
		}
		if grammar.IsKeyword(base) {
			base += "_"
		}
		if maxLen > 0 && len(base) > maxLen {
			base = base[:maxLen]
		}
		name := base
		for k := 2; used[name]; k++ {
			sfx := "_" + strconv.Itoa(k)
			cut := base
			if maxLen > 0 && len(cut)+len(sfx) > maxLen {
				cut = cut[:max(0, maxLen-len(sfx))]
			}
			name = cut + sfx
		}
		used[name] = true
		names[i] = name
	}
	return names
}
