package journal

import "testing"

func TestPackKeyRoundTrip(t *testing.T) {
	tests := []struct {
		wf, path string
		attempt  int
		key      string
	}{
		{"wf1", "0", 0, "wf1/0/0000000000"},
		{"01JABC", "2.1/0.0/3", 7, "01JABC/2.1/0.0/3/0000000007"},
		{"w", "5", 1234567890, "w/5/1234567890"},
	}
	for _, tt := range tests {
		key := PackKey(tt.wf, tt.path, tt.attempt)
		if key != tt.key {
			t.Errorf("PackKey(%q, %q, %d) = %q, want %q", tt.wf, tt.path, tt.attempt, key, tt.key)
		}
		wf, path, attempt, err := ParsePackKey(key)
		if err != nil || wf != tt.wf || path != tt.path || attempt != tt.attempt {
			t.Errorf("ParsePackKey(%q) = %q, %q, %d, %v", key, wf, path, attempt, err)
		}
	}
}

func TestParsePackKeyRejects(t *testing.T) {
	for _, key := range []string{"", "wf", "wf/0", "/0/1", "wf//1", "wf/0/x", "wf/0/-1"} {
		if _, _, _, err := ParsePackKey(key); err == nil {
			t.Errorf("ParsePackKey(%q) succeeded", key)
		}
	}
}
