package process

import (
	"io"
	"log"
	"os"
	"os/exec"
	"syscall"
	"time"

	"cubepod.local/podd/core"
	"github.com/creack/pty"
)

// warmShell is the shell E2B's SDKs start: commands run as `/bin/bash -l -c`, terminals as
// `/bin/bash -i -l`.
const warmShell = "/bin/bash"

// warmLimit ends a warm-up shell that has not exited by then (a start-up file that waits).
const warmLimit = 10 * time.Second

// Warm starts, once, the two shells an agent's first calls start (a login shell for a command,
// an interactive login shell on a terminal), as the sandbox's default user before any /init
// names one (E2B's `user` where the image has it), and lets them exit. A new sandbox's runtime
// has read none of the shell's files yet: under gVisor, loading the shell, its libraries, the
// terminal's description and the start-up files made a first terminal answer several times later
// than the next one. The shells save no history and leave nothing behind.
func (s *Service) Warm() {
	if _, err := os.Stat(warmShell); err != nil {
		return
	}
	u, err := core.LookupUser("user")
	if err != nil {
		if u, err = core.LookupUser("root"); err != nil {
			return
		}
	}
	// The variables E2B's SDKs give a terminal; no history file to write.
	env := append(s.session.Env(u), "TERM=xterm-256color", "LANG=C.UTF-8", "LC_ALL=C.UTF-8", "HISTFILE=")
	shell := func(args ...string) *exec.Cmd {
		cmd := exec.Command(warmShell, args...)
		cmd.Dir, cmd.Env = u.Home, env
		return cmd
	}
	attrs := func() *syscall.SysProcAttr {
		a := &syscall.SysProcAttr{Setsid: true}
		if os.Getuid() == 0 {
			a.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
		}
		return a
	}
	start := time.Now()
	cmd := shell("-l", "-c", "true")
	cmd.SysProcAttr = attrs()
	if err := cmd.Start(); err == nil {
		finish(cmd)
	}
	term := shell("-i", "-l")
	a := attrs()
	a.Setctty = true
	if tty, err := pty.StartWithAttrs(term, &pty.Winsize{Cols: 80, Rows: 24}, a); err == nil {
		_, _ = tty.Write([]byte("exit\n"))
		done := make(chan struct{})
		go func() { _, _ = io.Copy(io.Discard, tty); close(done) }()
		finish(term)
		_ = tty.Close()
		<-done
	}
	log.Printf("podd: shells warmed as %s in %s", u.Name, time.Since(start).Round(time.Millisecond))
}

// finish waits for a warm-up shell, killing it after warmLimit. Its status is of no interest (the
// orphan reaper may even have collected it first).
func finish(cmd *exec.Cmd) {
	t := time.AfterFunc(warmLimit, func() { _ = cmd.Process.Kill() })
	_ = cmd.Wait()
	t.Stop()
}
