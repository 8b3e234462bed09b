package bench

import (
	"os"
	"runtime"
	"testing"
	"time"
)

func TestParseStatCPU(t *testing.T) {
	// A command name with spaces and parentheses; utime 250, stime 50 ticks.
	line := []byte("1234 (my (odd) cmd) S 1 1234 1234 0 -1 4194560 100 0 0 0 250 50 0 0 20 0 12 0 100 0 0\n")
	got, err := parseStatCPU(line)
	if err != nil {
		t.Fatal(err)
	}
	if want := 3 * time.Second; got != want {
		t.Errorf("parseStatCPU = %v, want %v", got, want)
	}
	for _, bad := range []string{"no paren", "1 (x) S 1 2", "1 (x) S 1 2 3 4 5 6 7 8 9 10 x 5 0"} {
		if _, err := parseStatCPU([]byte(bad)); err == nil {
			t.Errorf("parseStatCPU(%q): want an error", bad)
		}
	}
}

func TestReadProcSelf(t *testing.T) {
	if runtime.GOOS != "linux" {
		t.Skip("reads /proc")
	}
	s, err := ReadProc(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if s.RSS < 1<<20 || s.Threads < 1 {
		t.Errorf("own process: RSS %d bytes, %d threads; want at least 1 MiB and 1 thread", s.RSS, s.Threads)
	}
	if _, err := ReadProc(-1); err == nil {
		t.Error("ReadProc(-1): want an error")
	}
}

func TestParseLoadAvg(t *testing.T) {
	if v, err := parseLoadAvg("1.94 0.56 1.00 1/151 8398\n"); err != nil || v != 1.94 {
		t.Errorf("parseLoadAvg = %v, %v; want 1.94", v, err)
	}
	if _, err := parseLoadAvg(""); err == nil {
		t.Error("empty load average accepted")
	}
}

func TestParsePSS(t *testing.T) {
	in := "55d0-7ffd ---p 00000000 00:00 0 [rollup]\nRss:               35528 kB\nPss:               10240 kB\nPss_Anon:           7720 kB\n"
	if v, err := parsePSS([]byte(in)); err != nil || v != 10240<<10 {
		t.Errorf("parsePSS = %v, %v; want %d", v, err, 10240<<10)
	}
	if _, err := parsePSS([]byte("Rss: 1 kB\n")); err == nil {
		t.Error("no Pss line accepted")
	}
}
