package grammar

import (
	"testing"
)

// Benchmarks: go test -run '^$' -bench . -benchmem ./grammar

func benchParse(b *testing.B, src []byte) {
	b.SetBytes(int64(len(src)))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := Parse("bench", src); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkParse10kServices(b *testing.B) {
	benchParse(b, []byte(sequenceOf(10000).String()))
}

func BenchmarkString10kServices(b *testing.B) {
	w := sequenceOf(10000)
	b.ReportAllocs()
	for b.Loop() {
		_ = w.String()
	}
}

func BenchmarkFormat10kServices(b *testing.B) {
	w := sequenceOf(10000)
	b.ReportAllocs()
	for b.Loop() {
		_ = Format(w)
	}
}

func BenchmarkParseDepth64(b *testing.B) {
	benchParse(b, []byte(nestedSource(64)))
}

func BenchmarkFormatDepth64(b *testing.B) {
	w, err := Parse("bench", []byte(nestedSource(64)))
	if err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	for b.Loop() {
		_ = Format(w)
	}
}

func BenchmarkParseGuarded(b *testing.B) {
	benchParse(b, []byte("A B C CHOICE(IF(A.size > 10 && input.mode == \"fast\") D, IF(B.ok) E, ELSE F) ENDCHOICE G"))
}

func BenchmarkPeel(b *testing.B) {
	cases := []struct{ name, src string }{
		{"service", "S1 S2 S3"},
		{"fork", "FORK(S3 S6, S7 S8) SYNC S9 S10"},
		{"choice", "CHOICE(S4 S5, S6) ENDCHOICE S9 S10"},
		{"first", "FIRST(S4, S5) ENDFIRST S9 S10"},
		{"failover", "FAILOVER(S4, S5) ENDFAILOVER S9 S10"},
	}
	for _, c := range cases {
		w, err := Parse("bench", []byte(c.src))
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := Peel(w, pick(0)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkPeel10kToEnd(b *testing.B) {
	w := sequenceOf(10000)
	b.ReportAllocs()
	for b.Loop() {
		cur := w
		for cur != nil {
			_, rest, err := Peel(cur, nil)
			if err != nil {
				b.Fatal(err)
			}
			cur = rest
		}
	}
}
