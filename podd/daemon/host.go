package daemon

import (
	"bufio"
	"errors"
	"math"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// Metrics is envd's GET /metrics: the sandbox's CPU, memory and disk. A sandbox is a
// container, so they are its cgroup's (limits and use), not the node's.
type Metrics struct {
	Timestamp   int64   `json:"ts"`
	CPUCount    uint32  `json:"cpu_count"`
	CPUUsedPct  float64 `json:"cpu_used_pct"`
	MemTotalMiB uint64  `json:"mem_total_mib"`
	MemUsedMiB  uint64  `json:"mem_used_mib"`
	MemTotal    uint64  `json:"mem_total"`
	MemUsed     uint64  `json:"mem_used"`
	MemCache    uint64  `json:"mem_cache"`
	DiskUsed    uint64  `json:"disk_used"`
	DiskTotal   uint64  `json:"disk_total"`
}

// cgroup is where the sandbox's own cgroup (v2) shows inside its mount namespace.
const cgroup = "/sys/fs/cgroup"

// host samples the figures; CPU use is over the time since the previous sample, as envd's.
type host struct {
	mu       sync.Mutex
	lastUsec uint64
	lastAt   time.Time
	// disk is a path on the filesystem whose size and use are the sandbox's disk.
	disk string
}

func newHost() *host {
	h := &host{disk: "/"}
	h.lastUsec, _ = cpuUsec()
	h.lastAt = time.Now()
	return h
}

func (h *host) sample() (*Metrics, error) {
	now := time.Now()
	m := &Metrics{Timestamp: now.Unix(), CPUCount: cpuCount()}
	usec, err := cpuUsec()
	if err != nil {
		return nil, err
	}
	h.mu.Lock()
	if elapsed := now.Sub(h.lastAt).Microseconds(); elapsed > 0 && usec >= h.lastUsec {
		pct := float64(usec-h.lastUsec) / float64(elapsed) / float64(m.CPUCount) * 100
		m.CPUUsedPct = math.Round(math.Min(pct, 100)*100) / 100
	}
	h.lastUsec, h.lastAt = usec, now
	h.mu.Unlock()
	m.MemUsed, m.MemTotal, m.MemCache = memory()
	m.MemUsedMiB, m.MemTotalMiB = m.MemUsed>>20, m.MemTotal>>20
	m.DiskUsed, m.DiskTotal = disk(h.disk)
	return m, nil
}

// maxFigure is the largest figure a client reads exactly (a JSON number, 2^53): a filesystem
// that claims more has no size to tell (gVisor's memory-backed root says 2^63).
const maxFigure = 1 << 53

// disk is the use and size of the filesystem at path; zero when it tells none.
func disk(path string) (used, total uint64) {
	var st unix.Statfs_t
	if unix.Statfs(path, &st) != nil {
		return 0, 0
	}
	total = st.Blocks * uint64(st.Bsize)
	if total > maxFigure || st.Bavail > st.Blocks {
		return 0, 0
	}
	return (st.Blocks - st.Bavail) * uint64(st.Bsize), total
}

// cpuCount is the CPUs the cgroup's quota allows (rounded up), else the machine's.
func cpuCount() uint32 {
	n := runtime.NumCPU()
	if raw, err := os.ReadFile(cgroup + "/cpu.max"); err == nil {
		f := strings.Fields(string(raw))
		if len(f) == 2 && f[0] != "max" {
			quota, err1 := strconv.ParseFloat(f[0], 64)
			period, err2 := strconv.ParseFloat(f[1], 64)
			if err1 == nil && err2 == nil && period > 0 {
				if c := int(math.Ceil(quota / period)); c > 0 && c < n {
					n = c
				}
			}
		}
	}
	return uint32(n)
}

// cpuUsec is the CPU time the cgroup's processes used, else the machine's.
func cpuUsec() (uint64, error) {
	if v, ok := keyed(cgroup+"/cpu.stat", "usage_usec"); ok {
		return v, nil
	}
	raw, err := os.ReadFile("/proc/stat")
	if err != nil {
		return 0, err
	}
	line, _, _ := strings.Cut(string(raw), "\n")
	f := strings.Fields(line)
	if len(f) < 4 || f[0] != "cpu" {
		return 0, errors.New("/proc/stat has no cpu line")
	}
	var ticks uint64
	for i, v := range f[1:] {
		if i == 3 || i == 4 { // idle, iowait
			continue
		}
		n, _ := strconv.ParseUint(v, 10, 64)
		ticks += n
	}
	return ticks * 10000, nil // USER_HZ is 100 on Linux
}

// memory is the cgroup's use, limit (the machine's memory when it has none) and page cache. A
// sandbox with a kernel of its own (gVisor, a VM) has no such cgroup inside: that kernel's own
// figures are the sandbox's then.
func memory() (used, total, cache uint64) {
	total = machineMemory()
	if raw, err := os.ReadFile(cgroup + "/memory.max"); err == nil {
		if v, err := strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64); err == nil && v < total {
			total = v
		}
	}
	raw, err := os.ReadFile(cgroup + "/memory.current")
	if err != nil {
		available, _ := keyed("/proc/meminfo", "MemAvailable:")
		cache, _ = keyed("/proc/meminfo", "Cached:")
		if available*1024 < total {
			used = total - available*1024
		}
		return used, total, cache * 1024
	}
	used, _ = strconv.ParseUint(strings.TrimSpace(string(raw)), 10, 64)
	cache, _ = keyed(cgroup+"/memory.stat", "file")
	if used >= cache {
		used -= cache
	}
	return used, total, cache
}

func machineMemory() uint64 {
	v, _ := keyed("/proc/meminfo", "MemTotal:")
	return v * 1024
}

// keyed is the number after a key at the start of a line of a file.
func keyed(path, key string) (uint64, bool) {
	f, err := os.Open(path)
	if err != nil {
		return 0, false
	}
	defer f.Close()
	s := bufio.NewScanner(f)
	for s.Scan() {
		fields := strings.Fields(s.Text())
		if len(fields) >= 2 && fields[0] == key {
			v, err := strconv.ParseUint(fields[1], 10, 64)
			return v, err == nil
		}
	}
	return 0, false
}
