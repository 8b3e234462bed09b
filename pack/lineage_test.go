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
	if l := (&Pack{Trace: []TraceEntry{{Path: "0"}}}).Lineage(); l.Marks != nil || l.Actor != nil || l.String() != "" {
		t.Fatalf("a chain never re-routed has lineage %v", l)
	}
	p.Settle = []Settle{{Kind: SettleGuard, Key: "wf/1"}, {Kind: SettleJoinForwarded, Key: "j-1", Epoch: 2, Actor: "12D3KooWB"}}
	got = p.Lineage().String()
	if want := "1@2,3.1/0@1;j-1:2:12D3KooWB"; got != want {
		t.Fatalf("lineage with a join actor %q, want %q", got, want)
	}
	if back, err := ParseLineage(got); err != nil || back.String() != got {
		t.Fatalf("ParseLineage(%q) = %v, %v", got, back, err)
	}
	if back, err := ParseLineage(";j-1:0:"); err != nil || back.Actor == nil || back.Marks != nil {
		t.Fatalf("ParseLineage of an actor alone = %+v, %v", back, err)
	}
	for _, bad := range []string{"1", "1@0", "@2", "1@x", "1@2,", "1@2;j-1", "1@2;j-1:x:a", ";:1:a"} {
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
		{";j-1:1:a", ";j-1:0:z", 1, "a takeover's epoch is newer than the old actor's"},
		{";j-1:1:a", ";j-1:1:b", -1, "two actors at one epoch: the greater peer ID wins (join J7)"},
		{";j-1:1:a", ";j-1:1:a", 0, "the same actor's pack twice"},
		{";j-1:1:a", ";j-2:0:a", 0, "two joins: not comparable"},
		{";j-1:1:a", "", 0, "no join actor on one side"},
		{"1@1;j-1:0:a", ";j-1:5:a", 1, "a re-route decides before the actors do"},
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
