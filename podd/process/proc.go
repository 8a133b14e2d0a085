// Package process is envd's process.Process service: start processes (with pipes or a PTY) as
// a user, stream their output, and let later calls find them by pid or tag to send input and
// signals, resize their terminal or watch them again. A process outlives the request that
// started it; only its end, a signal or the start request's own timeout stop it.
package process

import (
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"sync"
	"syscall"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	spec "cubepod.local/podd/spec/process"
)

// Chunk sizes of one output event, as envd reads them.
const (
	pipeChunk = 32 << 10
	ptyChunk  = 16 << 10
	// subscriberBuffer is how far a watcher may fall behind before it holds the output back.
	subscriberBuffer = 64
)

// proc is one running process and whoever is following its output.
type proc struct {
	pid    uint32
	tag    string
	config *spec.ProcessConfig
	cmd    *exec.Cmd
	tty    *os.File // the PTY's controller, for a PTY process

	stdinMu sync.Mutex
	stdin   io.WriteCloser // nil when stdin is off or closed

	mu     sync.Mutex
	subs   map[*subscriber]struct{}
	end    *spec.ProcessEvent_EndEvent
	ended  chan struct{}
	signal chan struct{} // closed once a kill or terminate was sent: output is not waited for
	once   sync.Once
}

type subscriber struct {
	events chan *spec.ProcessEvent
	done   <-chan struct{}
}

func (p *proc) subscribe(done <-chan struct{}) (*subscriber, *spec.ProcessEvent_EndEvent) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.end != nil {
		return nil, p.end
	}
	s := &subscriber{events: make(chan *spec.ProcessEvent, subscriberBuffer), done: done}
	p.subs[s] = struct{}{}
	return s, nil
}

func (p *proc) unsubscribe(s *subscriber) {
	p.mu.Lock()
	defer p.mu.Unlock()
	delete(p.subs, s)
}

// publish hands an output event to every follower; a follower that is gone is skipped, one
// that is slow holds the output back (as envd's does), output nobody follows is dropped.
func (p *proc) publish(e *spec.ProcessEvent) {
	p.mu.Lock()
	subs := make([]*subscriber, 0, len(p.subs))
	for s := range p.subs {
		subs = append(subs, s)
	}
	p.mu.Unlock()
	for _, s := range subs {
		select {
		case s.events <- e:
		case <-s.done:
		}
	}
}

// finish records the end and closes every follower's stream.
func (p *proc) finish(end *spec.ProcessEvent_EndEvent) {
	p.mu.Lock()
	p.end = end
	subs := p.subs
	p.subs = nil
	p.mu.Unlock()
	for s := range subs {
		close(s.events)
	}
	close(p.ended)
}

// kill sends a signal to the process itself (not its group, as envd).
func (p *proc) kill(sig syscall.Signal) error {
	if err := p.cmd.Process.Signal(sig); err != nil {
		return err
	}
	p.once.Do(func() { close(p.signal) })
	return nil
}

// read forwards one output stream until it ends.
func (p *proc) read(r io.Reader, size int, wrap func([]byte) *spec.ProcessEvent_DataEvent) {
	buf := make([]byte, size)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			chunk := append([]byte(nil), buf[:n]...)
			p.publish(&spec.ProcessEvent{Event: &spec.ProcessEvent_Data{Data: wrap(chunk)}})
		}
		if err != nil {
			return
		}
	}
}

// launch starts the command with its pipes or PTY and follows it until it ends; onEnd runs
// once the end is recorded.
func launch(cmd *exec.Cmd, req *spec.StartRequest, attrs *syscall.SysProcAttr, first *subscriber, onEnd func(*proc)) (*proc, error) {
	p := &proc{config: req.GetProcess(), tag: req.GetTag(), cmd: cmd, subs: map[*subscriber]struct{}{},
		ended: make(chan struct{}), signal: make(chan struct{})}
	if first != nil {
		p.subs[first] = struct{}{}
	}
	var readers sync.WaitGroup
	if size := req.GetPty().GetSize(); req.Pty != nil {
		attrs.Setsid, attrs.Setctty = true, true
		tty, err := pty.StartWithAttrs(cmd, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}, attrs)
		if err != nil {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting pty process: %w", err))
		}
		p.tty = tty
		readers.Add(1)
		go func() {
			defer readers.Done()
			p.read(tty, ptyChunk, func(b []byte) *spec.ProcessEvent_DataEvent {
				return &spec.ProcessEvent_DataEvent{Output: &spec.ProcessEvent_DataEvent_Pty{Pty: b}}
			})
		}()
	} else {
		cmd.SysProcAttr = attrs
		outR, outW, err1 := os.Pipe()
		errR, errW, err2 := os.Pipe()
		if err := errors.Join(err1, err2); err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating pipes: %w", err))
		}
		cmd.Stdout, cmd.Stderr = outW, errW
		if req.Stdin == nil || req.GetStdin() {
			in, err := cmd.StdinPipe()
			if err != nil {
				return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating stdin pipe: %w", err))
			}
			p.stdin = in
		}
		if err := cmd.Start(); err != nil {
			for _, c := range []io.Closer{outR, outW, errR, errW} {
				_ = c.Close()
			}
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("error starting process: %w", err))
		}
		// The child holds the write ends now.
		_ = outW.Close()
		_ = errW.Close()
		for _, out := range []struct {
			r    *os.File
			wrap func([]byte) *spec.ProcessEvent_DataEvent
		}{
			{outR, func(b []byte) *spec.ProcessEvent_DataEvent {
				return &spec.ProcessEvent_DataEvent{Output: &spec.ProcessEvent_DataEvent_Stdout{Stdout: b}}
			}},
			{errR, func(b []byte) *spec.ProcessEvent_DataEvent {
				return &spec.ProcessEvent_DataEvent{Output: &spec.ProcessEvent_DataEvent_Stderr{Stderr: b}}
			}},
		} {
			readers.Add(1)
			go func() {
				defer readers.Done()
				defer out.r.Close()
				p.read(out.r, pipeChunk, out.wrap)
			}()
		}
	}
	p.pid = uint32(cmd.Process.Pid)
	// The sandbox's processes, not podd, are what the kernel kills first when memory runs out.
	_ = os.WriteFile("/proc/"+strconv.Itoa(cmd.Process.Pid)+"/oom_score_adj", []byte("100"), 0)
	go func() {
		err := cmd.Wait()
		state := cmd.ProcessState
		output := make(chan struct{})
		go func() { readers.Wait(); close(output) }()
		// Output still open (a child left behind holds it) is waited for, unless the
		// process was killed.
		select {
		case <-output:
		case <-p.signal:
		}
		if p.tty != nil {
			_ = p.tty.Close()
		}
		p.closeStdin()
		p.finish(endOf(state, err))
		onEnd(p)
	}()
	return p, nil
}

func endOf(state *os.ProcessState, err error) *spec.ProcessEvent_EndEvent {
	if state == nil {
		msg := fmt.Sprint(err)
		return &spec.ProcessEvent_EndEvent{ExitCode: -1, Status: msg, Error: &msg}
	}
	end := &spec.ProcessEvent_EndEvent{ExitCode: int32(state.ExitCode()), Exited: state.Exited(), Status: state.String()}
	if !state.Success() {
		msg := state.String()
		end.Error = &msg
	}
	return end
}

// closeStdin ends the process's input (EOF); nothing happens when it has none.
func (p *proc) closeStdin() {
	p.stdinMu.Lock()
	defer p.stdinMu.Unlock()
	if p.stdin != nil {
		_ = p.stdin.Close()
		p.stdin = nil
	}
}
