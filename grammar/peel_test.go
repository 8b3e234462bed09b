package grammar

import (
	"errors"
	"fmt"
	"strings"
	"testing"
)

// peeled renders a Peel result as "HEAD | RESIDUAL" for table tests; a
// pattern head shows its branches as [b1; b2].
func peeled(h Head, rest *Workflow) string {
	var head string
	if h.Kind == HeadService {
		head = h.Service.String()
	} else {
		parts := make([]string, len(h.Branches))
		for i, b := range h.Branches {
			parts[i] = b.String()
		}
		head = h.Kind.String() + "[" + strings.Join(parts, "; ") + "]"
	}
	r := "nil"
	if rest != nil {
		r = rest.String()
	}
	return head + " | " + r
}

func pick(i int) Selector { return func(*Choice) (int, error) { return i, nil } }

// TestPeelFig2 walks the paper's Fig. 2 workflow to the end, pattern by
// pattern, as the nodes of §3.2 would.
func TestPeelFig2(t *testing.T) {
	w, err := Parse("fig2", []byte(fig2))
	if err != nil {
		t.Fatal(err)
	}
	before := w.String()
	steps := []struct {
		from string // which workflow to peel: "w" = the residual of the previous step
		sel  Selector
		want string
	}{
		{"w", nil, "S1 | S2 FORK(S3 CHOICE(S4, S5) ENDCHOICE S6, S7 S8) SYNC S9 S10"},
		{"w", nil, "S2 | FORK(S3 CHOICE(S4, S5) ENDCHOICE S6, S7 S8) SYNC S9 S10"},
		{"w", nil, "FORK[S3 CHOICE(S4, S5) ENDCHOICE S6; S7 S8] | S9 S10"},
	}
	cur := w
	var fork Head
	for i, st := range steps {
		h, rest, err := Peel(cur, st.sel)
		if err != nil {
			t.Fatalf("step %d: %v", i, err)
		}
		if got := peeled(h, rest); got != st.want {
			t.Fatalf("step %d: got %q, want %q", i, got, st.want)
		}
		fork, cur = h, rest
	}
	continuation := cur

	// Branch 1: S3, then the CHOICE: the chosen arm is prepended to S6.
	walk := func(w *Workflow, sel Selector, want ...string) {
		t.Helper()
		for i, wnt := range want {
			h, rest, err := Peel(w, sel)
			if err != nil {
				t.Fatalf("peel %d of %s: %v", i, w, err)
			}
			if got := peeled(h, rest); got != wnt {
				t.Fatalf("peel %d: got %q, want %q", i, got, wnt)
			}
			w = rest
		}
		if w != nil {
			t.Fatalf("residual left: %s", w)
		}
	}
	walk(fork.Branches[0], pick(0), "S3 | CHOICE(S4, S5) ENDCHOICE S6", "S4 | S6", "S6 | nil")
	walk(fork.Branches[0], pick(1), "S3 | CHOICE(S4, S5) ENDCHOICE S6", "S5 | S6", "S6 | nil")
	walk(fork.Branches[1], nil, "S7 | S8", "S8 | nil")
	walk(continuation, nil, "S9 | S10", "S10 | nil")

	if _, _, err := Peel(nil, nil); !errors.Is(err, ErrEmpty) {
		t.Errorf("Peel(nil) = %v, want ErrEmpty", err)
	}
	if w.String() != before {
		t.Errorf("Peel modified its input: %s", w)
	}
}

func TestPeelPatterns(t *testing.T) {
	tests := []struct {
		name, src string
		sel       Selector
		want      string
		wantErr   string
	}{
		{"first", "FIRST(A B, C) ENDFIRST D", nil, "FIRST[A B; C] | D", ""},
		{"failover last", "X FAILOVER(A, B) ENDFAILOVER", nil, "X | FAILOVER(A, B) ENDFAILOVER", ""},
		{"failover head", "FAILOVER(A[timeout=1s], B) ENDFAILOVER", nil, "FAILOVER[A[timeout=1s]; B] | nil", ""},
		{"choice to fork", "CHOICE(FORK(A, B) SYNC, C) ENDCHOICE D", pick(0), "FORK[A; B] | D", ""},
		{"choice to nested choice", "CHOICE(CHOICE(A, B) ENDCHOICE E, C) ENDCHOICE D", pick(0), "A | E D", ""},
		{"guarded choice", "X CHOICE(IF(X) A, ELSE B) ENDCHOICE", pick(1), "X | CHOICE(IF(X) A, ELSE B) ENDCHOICE", ""},
		{"choice needs selector", "CHOICE(A, B) ENDCHOICE", nil, "", "1:1: CHOICE needs a selector"},
		{"selector out of range", "CHOICE(A, B) ENDCHOICE", pick(2), "", "1:1: selector chose arm 2 of 2"},
		{"selector error", "CHOICE(A, B) ENDCHOICE", func(*Choice) (int, error) { return 0, fmt.Errorf("no live provider for A or B") }, "", "no live provider for A or B"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := Parse("t", []byte(tt.src))
			if err != nil {
				t.Fatal(err)
			}
			h, rest, err := Peel(w, tt.sel)
			if tt.wantErr != "" {
				if err == nil || err.Error() != tt.wantErr {
					t.Fatalf("err = %v, want %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if got := peeled(h, rest); got != tt.want {
				t.Errorf("got %q, want %q", got, tt.want)
			}
		})
	}
}

func TestAssignPaths(t *testing.T) {
	w, err := Parse("fig2", []byte(fig2))
	if err != nil {
		t.Fatal(err)
	}
	AssignPaths(w)
	var got []string
	WalkServices(w, func(s *Service) { got = append(got, s.Name+"="+s.Path) })
	want := "S1=0 S2=1 S3=2.0/0 S4=2.0/1.0/0 S5=2.0/1.1/0 S6=2.0/2 S7=2.1/0 S8=2.1/1 S9=3 S10=4"
	if strings.Join(got, " ") != want {
		t.Errorf("paths\n got %s\nwant %s", strings.Join(got, " "), want)
	}

	// Paths survive Peel: the chosen arm keeps the path it had in the whole.
	_, rest, _ := Peel(w, nil)
	_, rest, _ = Peel(rest, nil)
	h, _, _ := Peel(rest, nil)
	_, arm, _ := Peel(h.Branches[0], nil)
	h4, _, err := Peel(arm, pick(0))
	if err != nil || h4.Service.Path != "2.0/1.0/0" {
		t.Errorf("S4 after peeling: %+v %v", h4.Service, err)
	}

	// Unique on random trees.
	for seed := range uint64(100) {
		w := newGen(seed, 4).workflow(0, 8)
		AssignPaths(w)
		seen := map[string]string{}
		WalkServices(w, func(s *Service) {
			if s.Path == "" {
				t.Fatalf("seed %d: %s has no path", seed, s.Name)
			}
			if other, dup := seen[s.Path]; dup {
				t.Fatalf("seed %d: %s and %s share path %s", seed, other, s.Name, s.Path)
			}
			seen[s.Path] = s.Name
		})
	}
}
