package bench

import (
	"bufio"
	"os"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// Machine describes the computer a bench ran on.
type Machine struct {
	CPUs      int       `json:"cpus"`
	Model     string    `json:"model"`
	MemoryMiB int64     `json:"memory_mib"`
	Kernel    string    `json:"kernel"`
	GoVersion string    `json:"go_version"`
	GOARCH    string    `json:"goarch"`
	LoadAvg   string    `json:"loadavg"`
	Date      time.Time `json:"date"`
}

// ThisMachine reads the machine's description from /proc and the runtime
// (fields it cannot read stay empty).
func ThisMachine() Machine {
	m := Machine{CPUs: runtime.NumCPU(), GoVersion: runtime.Version(), GOARCH: runtime.GOARCH, Date: time.Now().UTC()}
	m.Model = procField("/proc/cpuinfo", "model name")
	if m.Model == "" {
		m.Model = procField("/proc/cpuinfo", "Model") // Raspberry Pi
	}
	if kb, err := strconv.ParseInt(strings.Fields(procField("/proc/meminfo", "MemTotal") + " 0")[0], 10, 64); err == nil {
		m.MemoryMiB = kb >> 10
	}
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		m.Kernel = strings.TrimSpace(string(b))
	}
	m.LoadAvg = LoadAvg()
	return m
}

// LoadAvg returns the 1, 5 and 15 minute load averages from /proc/loadavg.
func LoadAvg() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return ""
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return ""
	}
	return strings.Join(f[:3], " ")
}

// procField returns the value of the first "key : value" line of a /proc
// file.
func procField(path, key string) string {
	f, err := os.Open(path)
	if err != nil {
		return ""
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
