package grammar

import (
	"strings"
	"testing"
)

func TestFormat(t *testing.T) {
	long := "FORK(" + strings.Repeat("alpha-service-name ", 3) + "x1, " + strings.Repeat("beta-service-name ", 3) + "y1) SYNC"
	tests := []struct {
		name, src, want string
	}{
		{"paper", fig2, "S1 S2\nFORK(S3 CHOICE(S4, S5) ENDCHOICE S6, S7 S8) SYNC\nS9 S10\n"},
		{"services wrap at 80", strings.Repeat("service-number-one ", 6),
			"service-number-one service-number-one service-number-one service-number-one\nservice-number-one service-number-one\n"},
		{"long fork splits", long,
			"FORK(\n  alpha-service-name alpha-service-name alpha-service-name x1,\n  beta-service-name beta-service-name beta-service-name y1\n) SYNC\n"},
		{"guarded arms", "A CHOICE(IF(A.size > 1000000 && input.mode == \"fast\") B-long-name-here, IF(A.size > 10) C, ELSE D) ENDCHOICE",
			"A\nCHOICE(\n  IF(A.size > 1000000 && input.mode == \"fast\") B-long-name-here,\n  IF(A.size > 10) C,\n  ELSE D\n) ENDCHOICE\n"},
		{"long arm body goes under its guard", "A CHOICE(IF(A) " + strings.Repeat("body-service-number ", 4) + "z, ELSE D) ENDCHOICE",
			"A\nCHOICE(\n  IF(A)\n    body-service-number body-service-number body-service-number\n    body-service-number z,\n  ELSE D\n) ENDCHOICE\n"},
		{"comments kept", "# head\n\n# about A\nA # trailing A\nB\n# before fork\nFORK(\n  C, # after C\n  # before D\n  D\n) SYNC # after sync\n# tail\n",
			"# head\n\n# about A\nA # trailing A\nB\n# before fork\nFORK(\n  C, # after C\n  # before D\n  D\n) SYNC # after sync\n# tail\n"},
		{"comment forces split", "FORK(C, # c\nD) SYNC", "FORK(\n  C, # c\n  D\n) SYNC\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := ParseFile("t", []byte(tt.src), DefaultLimits())
			if err != nil {
				t.Fatal(err)
			}
			got := FormatFile(f)
			if got != tt.want {
				t.Fatalf("FormatFile(%q)\n got:\n%s\nwant:\n%s", tt.src, got, tt.want)
			}
			// Fixed point, and the tree survives.
			f2, err := ParseFile("t", []byte(got), DefaultLimits())
			if err != nil {
				t.Fatalf("formatted text does not parse: %v\n%s", err, got)
			}
			if again := FormatFile(f2); again != got {
				t.Errorf("not a fixed point:\n%s\nthen\n%s", got, again)
			}
			if !f2.Workflow.Equal(f.Workflow) {
				t.Errorf("tree changed: %s -> %s", f.Workflow, f2.Workflow)
			}
			if !strings.Contains(tt.src, "#") && Format(f.Workflow) != got {
				t.Errorf("Format and FormatFile disagree without comments")
			}
		})
	}
}

func TestFormatDeepNesting(t *testing.T) {
	w, err := Parse("t", []byte(nestedSource(64)))
	if err != nil {
		t.Fatal(err)
	}
	out := Format(w)
	back, err := Parse("t", []byte(out))
	if err != nil || !back.Equal(w) {
		t.Fatalf("64-deep Format does not round-trip: %v", err)
	}
	if Format(back) != out {
		t.Error("64-deep Format not stable")
	}
}
