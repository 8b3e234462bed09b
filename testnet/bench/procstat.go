package bench

import (
	"bufio"
	"bytes"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// userHZ is the unit of utime and stime in /proc/PID/stat. Linux exports
// them in USER_HZ, which is 100 on every architecture bedwe targets (amd64,
// arm64, armv7) whatever the kernel's own tick rate.
const userHZ = 100

// ProcSample is one reading of a process from /proc.
type ProcSample struct {
	// RSS is VmRSS from /proc/PID/status, in bytes; RSSAnon its
	// RssAnon part (private memory: heap, stacks), without the pages of
	// the executable that every node maps and shares.
	RSS, RSSAnon int64
	// Threads is the Threads line of /proc/PID/status.
	Threads int
	// CPU is utime + stime from /proc/PID/stat.
	CPU time.Duration
}

// ReadProc reads pid's resident memory, threads and CPU time from /proc.
func ReadProc(pid int) (ProcSample, error) {
	var s ProcSample
	status, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return s, fmt.Errorf("read process %d: %w", pid, err)
	}
	sc := bufio.NewScanner(bytes.NewReader(status))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			continue
		}
		switch key {
		case "VmRSS": // "  12345 kB"
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return s, fmt.Errorf("process %d: VmRSS %q: %w", pid, val, err)
			}
			s.RSS = kb << 10
		case "RssAnon":
			kb, err := strconv.ParseInt(f[0], 10, 64)
			if err != nil {
				return s, fmt.Errorf("process %d: RssAnon %q: %w", pid, val, err)
			}
			s.RSSAnon = kb << 10
		case "Threads":
			s.Threads, _ = strconv.Atoi(f[0])
		}
	}
	stat, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return s, fmt.Errorf("read process %d: %w", pid, err)
	}
	cpu, err := parseStatCPU(stat)
	if err != nil {
		return s, fmt.Errorf("process %d: %w", pid, err)
	}
	s.CPU = cpu
	return s, nil
}

// parseStatCPU returns utime + stime (fields 14 and 15) of a
// /proc/PID/stat line. The command name (field 2) may hold spaces and
// parentheses, so fields are counted from the last ')'.
func parseStatCPU(stat []byte) (time.Duration, error) {
	i := bytes.LastIndexByte(stat, ')')
	if i < 0 {
		return 0, fmt.Errorf("malformed /proc stat line %q", stat)
	}
	f := strings.Fields(string(stat[i+1:]))
	// f[0] is field 3 (state); utime is field 14, stime field 15.
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc stat line %q", stat)
	}
	var ticks int64
	for _, s := range f[11:13] {
		v, err := strconv.ParseInt(s, 10, 64)
		if err != nil {
			return 0, fmt.Errorf("/proc stat cpu field %q: %w", s, err)
		}
		ticks += v
	}
	return time.Duration(ticks) * time.Second / userHZ, nil
}

// ReadPSS reads pid's proportional set size (shared pages divided among
// the processes sharing them) from /proc/PID/smaps_rollup, in bytes.
func ReadPSS(pid int) (int64, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/smaps_rollup", pid))
	if err != nil {
		return 0, fmt.Errorf("read process %d: %w", pid, err)
	}
	return parsePSS(b)
}

func parsePSS(b []byte) (int64, error) {
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		key, val, ok := strings.Cut(sc.Text(), ":")
		if !ok || key != "Pss" {
			continue
		}
		f := strings.Fields(val)
		if len(f) == 0 {
			break
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return 0, fmt.Errorf("smaps_rollup Pss %q: %w", val, err)
		}
		return kb << 10, nil
	}
	return 0, fmt.Errorf("no Pss line in smaps_rollup")
}
