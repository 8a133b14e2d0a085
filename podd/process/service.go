package process

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"net/http"
	"os"
	"os/exec"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"time"

	"connectrpc.com/connect"
	"github.com/creack/pty"

	"cubepod.local/podd/core"
	spec "cubepod.local/podd/spec/process"
)

// endKept is how long a process's end is kept after it, for a Connect that comes late.
const endKept = 30 * time.Second

// Service implements process.Process.
type Service struct {
	session *core.Session
	mu      sync.Mutex
	byPID   map[uint32]*proc
	ended   map[uint32]endedProc
}

type endedProc struct {
	tag string
	end *spec.ProcessEvent_EndEvent
	at  time.Time
}

// New is the service for a session.
func New(session *core.Session) *Service {
	return &Service{session: session, byPID: map[uint32]*proc{}, ended: map[uint32]endedProc{}}
}

func (s *Service) Start(ctx context.Context, req *connect.Request[spec.StartRequest], stream *connect.ServerStream[spec.StartResponse]) error {
	m := req.Msg
	if m.GetProcess().GetCmd() == "" {
		return connect.NewError(connect.CodeInvalidArgument, errors.New("process.cmd is required"))
	}
	u, err := s.session.User(req.Header())
	if err != nil {
		return connect.NewError(connect.CodeUnauthenticated, err)
	}
	var timeout time.Duration
	if v := req.Header().Get("Connect-Timeout-Ms"); v != "" {
		ms, err := strconv.ParseInt(v, 10, 64)
		if err != nil || ms < 0 {
			return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid Connect-Timeout-Ms %q", v))
		}
		timeout = time.Duration(ms) * time.Millisecond
	}
	cwd, err := core.Resolve(m.GetProcess().GetCwd(), u, s.session.Workdir())
	if err != nil {
		return connect.NewError(connect.CodeInvalidArgument, err)
	}
	if _, err := os.Stat(cwd); errors.Is(err, fs.ErrNotExist) {
		return connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cwd '%s' does not exist", cwd))
	}
	cmd := exec.Command(m.GetProcess().GetCmd(), m.GetProcess().GetArgs()...)
	cmd.Dir = cwd
	cmd.Env = append(s.session.Env(u), core.Pairs(m.GetProcess().GetEnvs())...)
	attrs := &syscall.SysProcAttr{}
	if os.Getuid() == 0 {
		attrs.Credential = &syscall.Credential{Uid: u.UID, Gid: u.GID, Groups: u.Groups}
	}
	follow, events := s.follower(ctx)
	// Started and registered under the table's lock, so that the orphan reaper never takes one
	// of podd's own processes for an orphan.
	s.mu.Lock()
	p, err := launch(cmd, m, attrs, follow, s.forget)
	if err != nil {
		s.mu.Unlock()
		return err
	}
	s.byPID[p.pid] = p
	s.mu.Unlock()
	if timeout > 0 {
		// As envd: the start request's timeout is the process's time to live.
		t := time.AfterFunc(timeout, func() { _ = p.kill(syscall.SIGKILL) })
		go func() { <-p.ended; t.Stop() }()
	}
	return s.stream(ctx, req.Header(), p.pid, events, func(e *spec.ProcessEvent) error {
		return stream.Send(&spec.StartResponse{Event: e})
	})
}

// follower is a subscriber for a stream's lifetime.
func (s *Service) follower(ctx context.Context) (*subscriber, <-chan *spec.ProcessEvent) {
	sub := &subscriber{events: make(chan *spec.ProcessEvent, subscriberBuffer), done: ctx.Done()}
	return sub, sub.events
}

// stream sends the start event, then output and keepalives until the process ends (its end
// event) or the client goes.
func (s *Service) stream(ctx context.Context, h http.Header, pid uint32, events <-chan *spec.ProcessEvent, send func(*spec.ProcessEvent) error) error {
	locked := core.Serialized(send)
	if err := locked(&spec.ProcessEvent{Event: &spec.ProcessEvent_Start{Start: &spec.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
		return err
	}
	keepalive := core.StartKeepalive(ctx, h, func() error {
		return locked(&spec.ProcessEvent{Event: &spec.ProcessEvent_Keepalive{Keepalive: &spec.ProcessEvent_KeepAlive{}}})
	})
	defer keepalive.Stop()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case e, ok := <-events:
			if !ok {
				end := s.endOf(pid)
				return locked(&spec.ProcessEvent{Event: &spec.ProcessEvent_End{End: end}})
			}
			keepalive.Reset()
			if err := locked(e); err != nil {
				return err
			}
		}
	}
}

// forget moves an ended process from the table to the recently ended.
func (s *Service) forget(p *proc) {
	s.mu.Lock()
	defer s.mu.Unlock()
	delete(s.byPID, p.pid)
	now := time.Now()
	for pid, e := range s.ended {
		if now.Sub(e.at) > endKept {
			delete(s.ended, pid)
		}
	}
	s.ended[p.pid] = endedProc{tag: p.tag, end: p.end, at: now}
}

func (s *Service) endOf(pid uint32) *spec.ProcessEvent_EndEvent {
	s.mu.Lock()
	defer s.mu.Unlock()
	if p, ok := s.byPID[pid]; ok && p.end != nil {
		return p.end
	}
	return s.ended[pid].end
}

// find is the running process a selector names.
func (s *Service) find(sel *spec.ProcessSelector) (*proc, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch v := sel.GetSelector().(type) {
	case *spec.ProcessSelector_Pid:
		if p, ok := s.byPID[v.Pid]; ok {
			return p, nil
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d not found", v.Pid))
	case *spec.ProcessSelector_Tag:
		for _, p := range s.byPID {
			if p.tag == v.Tag {
				return p, nil
			}
		}
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with tag %s not found", v.Tag))
	}
	return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("process: a pid or a tag is required"))
}

// recentEnd is the kept end of a process a selector names, if it ended lately.
func (s *Service) recentEnd(sel *spec.ProcessSelector) (uint32, *spec.ProcessEvent_EndEvent) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for pid, e := range s.ended {
		if time.Since(e.at) > endKept {
			continue
		}
		if (sel.GetTag() != "" && e.tag == sel.GetTag()) || (sel.GetTag() == "" && pid == sel.GetPid()) {
			return pid, e.end
		}
	}
	return 0, nil
}

func (s *Service) Connect(ctx context.Context, req *connect.Request[spec.ConnectRequest], stream *connect.ServerStream[spec.ConnectResponse]) error {
	send := func(e *spec.ProcessEvent) error { return stream.Send(&spec.ConnectResponse{Event: e}) }
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		if pid, end := s.recentEnd(req.Msg.GetProcess()); end != nil {
			if err := send(&spec.ProcessEvent{Event: &spec.ProcessEvent_Start{Start: &spec.ProcessEvent_StartEvent{Pid: pid}}}); err != nil {
				return err
			}
			return send(&spec.ProcessEvent{Event: &spec.ProcessEvent_End{End: end}})
		}
		return err
	}
	sub, end := p.subscribe(ctx.Done())
	if end != nil {
		if err := send(&spec.ProcessEvent{Event: &spec.ProcessEvent_Start{Start: &spec.ProcessEvent_StartEvent{Pid: p.pid}}}); err != nil {
			return err
		}
		return send(&spec.ProcessEvent{Event: &spec.ProcessEvent_End{End: end}})
	}
	defer p.unsubscribe(sub)
	return s.stream(ctx, req.Header(), p.pid, sub.events, send)
}

func (s *Service) List(context.Context, *connect.Request[spec.ListRequest]) (*connect.Response[spec.ListResponse], error) {
	s.mu.Lock()
	out := make([]*spec.ProcessInfo, 0, len(s.byPID))
	for _, p := range s.byPID {
		info := &spec.ProcessInfo{Config: p.config, Pid: p.pid}
		if p.tag != "" {
			info.Tag = &p.tag
		}
		out = append(out, info)
	}
	s.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Pid < out[j].Pid })
	return connect.NewResponse(&spec.ListResponse{Processes: out}), nil
}

func (s *Service) Update(_ context.Context, req *connect.Request[spec.UpdateRequest]) (*connect.Response[spec.UpdateResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if req.Msg.Pty != nil {
		if p.tty == nil {
			return nil, connect.NewError(connect.CodeInternal, errors.New("error resizing tty: tty not assigned to process"))
		}
		size := req.Msg.GetPty().GetSize()
		if err := pty.Setsize(p.tty, &pty.Winsize{Cols: uint16(size.GetCols()), Rows: uint16(size.GetRows())}); err != nil {
			return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error resizing tty: %w", err))
		}
	}
	return connect.NewResponse(&spec.UpdateResponse{}), nil
}

// write hands input to a process's stdin or PTY.
func (p *proc) write(in *spec.ProcessInput) error {
	switch v := in.GetInput().(type) {
	case *spec.ProcessInput_Stdin:
		if p.tty != nil {
			return connect.NewError(connect.CodeInternal, errors.New("error writing to stdin: tty assigned to process, send input to the pty"))
		}
		p.stdinMu.Lock()
		defer p.stdinMu.Unlock()
		if p.stdin == nil {
			return connect.NewError(connect.CodeInternal, errors.New("error writing to stdin: stdin not enabled or closed"))
		}
		if _, err := p.stdin.Write(v.Stdin); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to stdin: %w", err))
		}
	case *spec.ProcessInput_Pty:
		if p.tty == nil {
			return connect.NewError(connect.CodeInternal, errors.New("error writing to tty: tty not assigned to process"))
		}
		if _, err := p.tty.Write(v.Pty); err != nil {
			return connect.NewError(connect.CodeInternal, fmt.Errorf("error writing to tty: %w", err))
		}
	default:
		return connect.NewError(connect.CodeInvalidArgument, errors.New("input: stdin or pty is required"))
	}
	return nil
}

func (s *Service) SendInput(_ context.Context, req *connect.Request[spec.SendInputRequest]) (*connect.Response[spec.SendInputResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.write(req.Msg.GetInput()); err != nil {
		return nil, err
	}
	return connect.NewResponse(&spec.SendInputResponse{}), nil
}

func (s *Service) StreamInput(_ context.Context, stream *connect.ClientStream[spec.StreamInputRequest]) (*connect.Response[spec.StreamInputResponse], error) {
	var p *proc
	for stream.Receive() {
		switch e := stream.Msg().GetEvent().(type) {
		case *spec.StreamInputRequest_Start:
			found, err := s.find(e.Start.GetProcess())
			if err != nil {
				return nil, err
			}
			p = found
		case *spec.StreamInputRequest_Data:
			if p == nil {
				return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("input before the start event naming the process"))
			}
			if err := p.write(e.Data.GetInput()); err != nil {
				return nil, err
			}
		case *spec.StreamInputRequest_Keepalive:
		default:
			return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("event: start, data or keepalive is required"))
		}
	}
	if err := stream.Err(); err != nil {
		return nil, connect.NewError(connect.CodeUnknown, fmt.Errorf("error reading input stream: %w", err))
	}
	return connect.NewResponse(&spec.StreamInputResponse{}), nil
}

func (s *Service) SendSignal(_ context.Context, req *connect.Request[spec.SendSignalRequest]) (*connect.Response[spec.SendSignalResponse], error) {
	var sig syscall.Signal
	switch req.Msg.GetSignal() {
	case spec.Signal_SIGNAL_SIGKILL:
		sig = syscall.SIGKILL
	case spec.Signal_SIGNAL_SIGTERM:
		sig = syscall.SIGTERM
	default:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("invalid signal: %s (SIGNAL_SIGKILL or SIGNAL_SIGTERM)", req.Msg.GetSignal()))
	}
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if err := p.kill(sig); err != nil {
		if errors.Is(err, os.ErrProcessDone) {
			return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("process with pid %d has ended", p.pid))
		}
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error sending signal: %w", err))
	}
	return connect.NewResponse(&spec.SendSignalResponse{}), nil
}

func (s *Service) CloseStdin(_ context.Context, req *connect.Request[spec.CloseStdinRequest]) (*connect.Response[spec.CloseStdinResponse], error) {
	p, err := s.find(req.Msg.GetProcess())
	if err != nil {
		return nil, err
	}
	if p.tty != nil {
		return nil, connect.NewError(connect.CodeFailedPrecondition, errors.New("cannot close stdin for PTY process, send Ctrl+D (0x04) instead"))
	}
	p.closeStdin()
	return connect.NewResponse(&spec.CloseStdinResponse{}), nil
}
