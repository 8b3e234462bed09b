package pack

import "testing"

func TestLineageFromTrace(t *testing.T) {
	p := &Pack{Trace: []TraceEntry{
		{Path: "0", Attempt: 0, Outcome: OutcomeOK},
		{Path: "1", Attempt: 0, Outcome: OutcomeSuperseded},
		{Path: "1", Attempt: 1, Outcome: OutcomeSuperseded},
		{Path: "1", Attempt: 2, Outcome: OutcomeFailed}, // a retry
		{Path: "1", Attempt: 2, Outcome: OutcomeOK},
		{Path: "2", Attempt: 0, Outcome: OutcomeOK},
		{Path: "3.1/0", Attempt: 1, Outcome: OutcomeOK},
	}}
	got := p.Lineage().String()
	if want := "1@2,3.1/0@1"; got != want {
		t.Fatalf("lineage %q, want %q", got, want)
	}
	back, err := ParseLineage(got)
	if err != nil || back.String() != got {
		t.Fatalf("ParseLineage(%q) = %v, %v", got, back, err)
	}
	if l := (&Pack{Trace: []TraceEntry{{Path: "0"}}}).Lineage(); l != nil || l.String() != "" {
		t.Fatalf("a chain never re-routed has lineage %v", l)
	}
	for _, bad := range []string{"1", "1@0", "@2", "1@x", "1@2,"} {
		if _, err := ParseLineage(bad); err == nil {
			t.Errorf("ParseLineage(%q) accepted", bad)
		}
	}
}

func TestLineageCompare(t *testing.T) {
	lin := func(s string) Lineage {
		l, err := ParseLineage(s)
		if err != nil {
			t.Fatal(err)
		}
		return l
	}
	cases := []struct {
		l, o string
		want int
		why  string
	}{
		{"", "", 0, "never re-routed"},
		{"1@1", "1@1", 0, "same chain"},
		{"1@1", "", 1, "l re-routed step 1, o is the chain that carried on at attempt 0"},
		{"", "1@1", -1, "o re-routed step 1"},
		{"1@2", "1@1", 1, "a higher attempt of the same step"},
		{"1@1", "1@1,3@1", -1, "o re-routed again further on"},
		{"1@1", "3@1", 1, "o's chain ran step 1 at attempt 0 and was re-routed later: l parted first"},
		{"3@1", "1@1", -1, "the mirror"},
		{"2.0/1@1", "2.0/0@1", -1, "inside a branch: step 0 before step 1"},
		{"2.1/0@1", "10@1", 1, "numbers, not strings: 2 before 10"},
	}
	for _, c := range cases {
		if got := lin(c.l).Compare(lin(c.o)); got != c.want {
			t.Errorf("Compare(%q, %q) = %d, want %d (%s)", c.l, c.o, got, c.want, c.why)
		}
	}
}

func TestPathBefore(t *testing.T) {
	ordered := []string{"0", "1", "2.0/0", "2.0/1", "2.0/2.1/0", "2.1/0", "3", "10"}
	for i := range ordered {
		for j := range ordered {
			if got, want := PathBefore(ordered[i], ordered[j]), i < j; got != want {
				t.Errorf("PathBefore(%q, %q) = %v, want %v", ordered[i], ordered[j], got, want)
			}
		}
	}
}
