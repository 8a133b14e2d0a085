package process

import (
	"os"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
)

// ReapOrphans waits for the processes that end up podd's children without being its own (what
// the sandbox's commands leave behind, handed to the container's first process when their
// parents end), so that they do not stay zombies. podd's own processes are left to the Wait of
// whoever started them. Only needed, and only started, when podd is the container's first process.
func (s *Service) ReapOrphans() {
	children := make(chan os.Signal, 1)
	signal.Notify(children, syscall.SIGCHLD)
	go func() {
		for range children {
			s.reap()
		}
	}()
}

func (s *Service) reap() {
	// Holding the table: a process being started is registered before this looks again.
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, pid := range zombies(os.Getpid()) {
		if _, ours := s.byPID[uint32(pid)]; ours {
			continue
		}
		var status syscall.WaitStatus
		_, _ = syscall.Wait4(pid, &status, syscall.WNOHANG, nil)
	}
}

// zombies are the ended children of parent that nobody has waited for.
func zombies(parent int) []int {
	stats, _ := filepath.Glob("/proc/[0-9]*/stat")
	var out []int
	for _, path := range stats {
		raw, err := os.ReadFile(path)
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...: comm may hold spaces and parentheses.
		rest := string(raw)
		if i := strings.LastIndexByte(rest, ')'); i >= 0 {
			rest = rest[i+1:]
		}
		f := strings.Fields(rest)
		if len(f) < 2 || f[0] != "Z" || f[1] != strconv.Itoa(parent) {
			continue
		}
		if pid, err := strconv.Atoi(filepath.Base(filepath.Dir(path))); err == nil {
			out = append(out, pid)
		}
	}
	return out
}
