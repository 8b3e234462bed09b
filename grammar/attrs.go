package grammar

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
)

// KnownAttrs lists the attribute keys a service may carry, in the order the
// documentation presents them.
var KnownAttrs = []string{AttrTimeout, AttrRetries, AttrBackoff, AttrOnce, AttrOut, AttrExpect, AttrReads}

// MaxRetries is the largest value of the retries attribute.
const MaxRetries = 100

// MaxReadsLen bounds the canonical text of a reads attribute, in bytes
// (other attribute values are names, bounded like names).
const MaxReadsLen = 4096

func isKnownAttr(key string) bool {
	for _, k := range KnownAttrs {
		if k == key {
			return true
		}
	}
	return false
}

// canonicalAttr validates the value of attribute key and returns its
// canonical text, or a message saying what is wrong.
func canonicalAttr(key, val string) (string, string) {
	switch key {
	case AttrTimeout, AttrExpect:
		d, msg := positiveDuration(key, val)
		if msg != "" {
			return "", msg
		}
		return d.String(), ""
	case AttrRetries:
		n, err := strconv.Atoi(val)
		if err != nil || n < 0 || n > MaxRetries {
			return "", fmt.Sprintf("retries must be an integer from 0 to %d, found %q", MaxRetries, val)
		}
		return strconv.Itoa(n), ""
	case AttrBackoff:
		lo, hi, ok := strings.Cut(val, "..")
		if !ok {
			return "", fmt.Sprintf("backoff must be MIN..MAX durations such as 500ms..10s, found %q", val)
		}
		dlo, msg := positiveDuration("backoff minimum", lo)
		if msg != "" {
			return "", msg
		}
		dhi, msg := positiveDuration("backoff maximum", hi)
		if msg != "" {
			return "", msg
		}
		if dlo > dhi {
			return "", fmt.Sprintf("backoff minimum %s is greater than its maximum %s", dlo, dhi)
		}
		return dlo.String() + ".." + dhi.String(), ""
	case AttrOnce:
		if val != "true" && val != "false" {
			return "", fmt.Sprintf("once must be true or false, found %q", val)
		}
		return val, ""
	case AttrOut:
		if msg := checkName(val); msg != "" {
			return "", "out " + msg
		}
		return val, ""
	case AttrReads:
		labels, msg := parseReads(val)
		if msg != "" {
			return "", msg
		}
		canon := formatReads(labels)
		if len(canon) > MaxReadsLen {
			return "", fmt.Sprintf("reads is %d bytes long, exceeds the limit of %d", len(canon), MaxReadsLen)
		}
		return canon, ""
	}
	return "", fmt.Sprintf("unknown attribute %q (known: %s)", key, strings.Join(KnownAttrs, ", "))
}

func positiveDuration(what, val string) (time.Duration, string) {
	d, err := time.ParseDuration(val)
	if err != nil {
		return 0, fmt.Sprintf("%s must be a duration such as 30s, 500ms or 2m, found %q", what, val)
	}
	if d <= 0 {
		return 0, fmt.Sprintf("%s must be greater than zero, found %q", what, val)
	}
	return d, ""
}

// checkName says what is wrong with s as a NAME, or returns "".
func checkName(s string) string {
	if s == "" {
		return "name is empty"
	}
	if IsKeyword(s) {
		return fmt.Sprintf("name %q is a reserved keyword", s)
	}
	for _, r := range s {
		if !isNameRune(r) {
			return fmt.Sprintf("name %q contains %q (allowed: letters, digits, '_', '-', '.')", s, r)
		}
	}
	return ""
}

// parseReads reads the value of a reads attribute: a parenthesised list of
// output labels, "(a, b)" or "()", or a single label without parentheses.
func parseReads(val string) ([]string, string) {
	val = strings.TrimSpace(val)
	inner, list := strings.CutPrefix(val, "(")
	if list {
		var closed bool
		if inner, closed = strings.CutSuffix(inner, ")"); !closed {
			return nil, fmt.Sprintf("reads must be a list of output labels such as (tiles, index) or (), found %q", val)
		}
	}
	if strings.TrimSpace(inner) == "" && list {
		return []string{}, ""
	}
	var labels []string
	for _, l := range strings.Split(inner, ",") {
		l = strings.TrimSpace(l)
		if msg := checkName(l); msg != "" {
			return nil, "reads " + msg
		}
		if slices.Contains(labels, l) {
			return nil, fmt.Sprintf("reads names %q twice", l)
		}
		labels = append(labels, l)
	}
	return labels, ""
}

// formatReads is the canonical text of a reads list: "(a, b)".
func formatReads(labels []string) string {
	return "(" + strings.Join(labels, ", ") + ")"
}
