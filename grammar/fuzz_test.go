package grammar

import (
	"testing"
)

// FuzzParse: no input panics the parser, every error carries a position,
// and any input that parses round-trips through String and Format.
func FuzzParse(f *testing.F) {
	for _, s := range []string{
		fig2,
		"S1[timeout=30s, retries=3, backoff=500ms..10s, once=true, out=tiles, expect=2m]",
		"A CHOICE(IF(A.n > 1 && input.s == \")\") B, ELSE C) ENDCHOICE",
		"FIRST(A, B) ENDFIRST FAILOVER(C, D) ENDFAILOVER",
		"# c\nA # t\nFORK(B, # x\n C) SYNC",
		nestedSource(8),
		"FORK(",
		"CHOICE(IF(",
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, src []byte) {
		file, err := ParseFile("fuzz", src, DefaultLimits())
		if err != nil {
			list, ok := err.(ErrorList)
			if !ok || len(list) == 0 {
				t.Fatalf("error is %T, not a non-empty ErrorList", err)
			}
			for _, e := range list {
				if e.Pos.Line < 1 || e.Pos.Col < 1 {
					t.Fatalf("error without position: %v", e)
				}
			}
			return
		}
		w := file.Workflow
		for name, text := range map[string]string{"String": w.String(), "Format": Format(w), "FormatFile": FormatFile(file)} {
			back, err := Parse("again", []byte(text))
			if err != nil {
				t.Fatalf("%s output does not parse: %v\ninput %q\noutput %q", name, err, src, text)
			}
			if !back.Equal(w) {
				t.Fatalf("%s output parses to another tree\ninput %q\noutput %q", name, src, text)
			}
		}
		formatted := FormatFile(file)
		again, err := ParseFile("again", []byte(formatted), DefaultLimits())
		if err != nil {
			t.Fatal(err)
		}
		if FormatFile(again) != formatted {
			t.Fatalf("FormatFile is not a fixed point for %q:\n%s\nthen\n%s", src, formatted, FormatFile(again))
		}
	})
}
