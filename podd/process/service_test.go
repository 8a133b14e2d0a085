package process

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"strings"
	"testing"
	"time"

	"connectrpc.com/connect"

	"cubepod.local/podd/core"
	spec "cubepod.local/podd/spec/process"
	"cubepod.local/podd/spec/process/processconnect"
)

// client talks to the service as E2B's SDKs do: Connect with JSON over HTTP/1.1.
func client(t *testing.T) processconnect.ProcessClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(processconnect.NewProcessHandler(New(core.NewSession(map[string]string{"E2B_SANDBOX": "true"}))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	return processconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithProtoJSON())
}

func code(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

func bash(script string) *spec.ProcessConfig {
	return &spec.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", script}}
}

// result follows a stream to its end: the pid, stdout, stderr, PTY output and the end event.
type result struct {
	pid                 uint32
	stdout, stderr, pty string
	end                 *spec.ProcessEvent_EndEvent
	keepalives          int
}

func follow[T interface{ GetEvent() *spec.ProcessEvent }](t *testing.T, s interface {
	Receive() bool
	Msg() T
	Err() error
}, until func(*result) bool) *result {
	t.Helper()
	r := &result{}
	for s.Receive() {
		e := s.Msg().GetEvent()
		switch {
		case e.GetStart() != nil:
			r.pid = e.GetStart().GetPid()
		case e.GetData() != nil:
			r.stdout += string(e.GetData().GetStdout())
			r.stderr += string(e.GetData().GetStderr())
			r.pty += string(e.GetData().GetPty())
		case e.GetKeepalive() != nil:
			r.keepalives++
		case e.GetEnd() != nil:
			r.end = e.GetEnd()
			return r
		}
		if until != nil && until(r) {
			return r
		}
	}
	if err := s.Err(); err != nil {
		t.Fatalf("stream: %v", err)
	}
	return r
}

func start(t *testing.T, c processconnect.ProcessClient, req *spec.StartRequest, header ...string) *connect.ServerStreamForClient[spec.StartResponse] {
	t.Helper()
	r := connect.NewRequest(req)
	for i := 0; i+1 < len(header); i += 2 {
		r.Header().Set(header[i], header[i+1])
	}
	s, err := c.Start(context.Background(), r)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func TestStartStreamsOutputAndExit(t *testing.T) {
	c := client(t)
	r := follow(t, start(t, c, &spec.StartRequest{Process: &spec.ProcessConfig{
		Cmd: "/bin/sh", Args: []string{"-c", "echo out; echo err >&2; echo $GREETING $E2B_SANDBOX; pwd; exit 3"},
		Envs: map[string]string{"GREETING": "hi"}, Cwd: ptr("/tmp"),
	}}), nil)
	if r.pid == 0 || r.stdout != "out\nhi true\n/tmp\n" || r.stderr != "err\n" {
		t.Fatalf("%+v", r)
	}
	if r.end.ExitCode != 3 || !r.end.Exited || r.end.Status != "exit status 3" || r.end.GetError() != "exit status 3" {
		t.Fatalf("end %v", r.end)
	}
}

func TestStartRefusals(t *testing.T) {
	c := client(t)
	cases := map[string]struct {
		req    *spec.StartRequest
		header []string
		want   connect.Code
	}{
		"no cmd":         {&spec.StartRequest{Process: &spec.ProcessConfig{}}, nil, connect.CodeInvalidArgument},
		"missing cwd":    {&spec.StartRequest{Process: &spec.ProcessConfig{Cmd: "/bin/true", Cwd: ptr("/no/such/dir")}}, nil, connect.CodeInvalidArgument},
		"missing binary": {&spec.StartRequest{Process: &spec.ProcessConfig{Cmd: "/no/such/binary"}}, nil, connect.CodeInvalidArgument},
		"unknown user":   {&spec.StartRequest{Process: &spec.ProcessConfig{Cmd: "/bin/true"}}, []string{"Authorization", "Basic bm9ib2R5LWF0LWFsbDo="}, connect.CodeUnauthenticated},
		"bad timeout":    {&spec.StartRequest{Process: &spec.ProcessConfig{Cmd: "/bin/true"}}, []string{"Connect-Timeout-Ms", "soon"}, connect.CodeInvalidArgument},
	}
	for name, tc := range cases {
		r := connect.NewRequest(tc.req)
		for i := 0; i+1 < len(tc.header); i += 2 {
			r.Header().Set(tc.header[i], tc.header[i+1])
		}
		s, err := c.Start(context.Background(), r)
		if err == nil {
			for s.Receive() {
			}
			err = s.Err()
		}
		if code(err) != tc.want {
			t.Errorf("%s: %v, want %v", name, err, tc.want)
		}
	}
}

func TestInputListConnectAndSignals(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	first := start(t, c, &spec.StartRequest{Process: bash("read line; echo got $line; cat"), Stdin: ptrBool(true), Tag: ptr("reader")})
	r := follow(t, first, func(r *result) bool { return r.pid != 0 })
	pid := r.pid
	sel := &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: pid}}

	list, err := c.List(ctx, connect.NewRequest(&spec.ListRequest{}))
	if err != nil || len(list.Msg.Processes) != 1 || list.Msg.Processes[0].GetTag() != "reader" || list.Msg.Processes[0].Config.Cmd != "/bin/sh" {
		t.Fatalf("list %v %v", list, err)
	}
	// A second follower, by tag, sees what comes after it joined.
	second, err := c.Connect(ctx, connect.NewRequest(&spec.ConnectRequest{Process: &spec.ProcessSelector{Selector: &spec.ProcessSelector_Tag{Tag: "reader"}}}))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()
	if !second.Receive() || second.Msg().GetEvent().GetStart().GetPid() != pid {
		t.Fatalf("connect start: %v %v", second.Msg(), second.Err())
	}
	if _, err := c.SendInput(ctx, connect.NewRequest(&spec.SendInputRequest{Process: sel, Input: &spec.ProcessInput{Input: &spec.ProcessInput_Stdin{Stdin: []byte("hello\n")}}})); err != nil {
		t.Fatal(err)
	}
	_, err = c.SendInput(ctx, connect.NewRequest(&spec.SendInputRequest{Process: sel, Input: &spec.ProcessInput{Input: &spec.ProcessInput_Pty{Pty: []byte("x")}}}))
	if code(err) != connect.CodeInternal {
		t.Fatalf("pty input to a pipe process: %v", err)
	}
	got := follow(t, first, func(r *result) bool { return strings.Contains(r.stdout, "got hello\n") })
	if got.stdout != "got hello\n" {
		t.Fatalf("first follower: %q", got.stdout)
	}
	if _, err := c.CloseStdin(ctx, connect.NewRequest(&spec.CloseStdinRequest{Process: sel})); err != nil {
		t.Fatal(err)
	}
	end := follow(t, first, nil)
	if end.end == nil || end.end.ExitCode != 0 {
		t.Fatalf("after EOF: %+v", end)
	}
	if r := follow(t, second, nil); r.end == nil || !strings.Contains(r.stdout, "got hello") {
		t.Fatalf("second follower: %+v", r)
	}
	// Gone: signals and input find nothing, a late Connect still gets its end.
	_, err = c.SendSignal(ctx, connect.NewRequest(&spec.SendSignalRequest{Process: sel, Signal: spec.Signal_SIGNAL_SIGKILL}))
	if code(err) != connect.CodeNotFound {
		t.Fatalf("signal to an ended process: %v", err)
	}
	late, err := c.Connect(ctx, connect.NewRequest(&spec.ConnectRequest{Process: sel}))
	if err != nil {
		t.Fatal(err)
	}
	if r := follow(t, late, nil); r.end == nil || r.pid != pid {
		t.Fatalf("late connect: %+v", r)
	}
	_, err = c.Connect(ctx, connect.NewRequest(&spec.ConnectRequest{Process: &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: 1 << 30}}}))
	if err == nil {
		s, _ := c.Connect(ctx, connect.NewRequest(&spec.ConnectRequest{Process: &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: 1 << 30}}}))
		for s.Receive() {
		}
		err = s.Err()
	}
	if code(err) != connect.CodeNotFound {
		t.Fatalf("connect to an unknown pid: %v", err)
	}
}

func TestKillEndsAProcessWhoseChildHoldsItsOutput(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s := start(t, c, &spec.StartRequest{Process: bash("sleep 60 & echo started; wait")})
	r := follow(t, s, func(r *result) bool { return r.stdout == "started\n" })
	sel := &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: r.pid}}
	_, err := c.SendSignal(ctx, connect.NewRequest(&spec.SendSignalRequest{Process: sel, Signal: spec.Signal_SIGNAL_UNSPECIFIED}))
	if code(err) != connect.CodeInvalidArgument {
		t.Fatalf("no signal: %v", err)
	}
	if _, err := c.SendSignal(ctx, connect.NewRequest(&spec.SendSignalRequest{Process: sel, Signal: spec.Signal_SIGNAL_SIGKILL})); err != nil {
		t.Fatal(err)
	}
	end := follow(t, s, nil).end
	if end == nil || end.ExitCode != -1 || end.Status != "signal: killed" {
		t.Fatalf("end %v", end)
	}
}

func TestStartTimeoutIsTheProcessLifetime(t *testing.T) {
	c := client(t)
	s := start(t, c, &spec.StartRequest{Process: bash("sleep 30")}, "Connect-Timeout-Ms", "300")
	for s.Receive() {
	}
	if code(s.Err()) != connect.CodeDeadlineExceeded {
		t.Fatalf("stream: %v", s.Err())
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		list, err := c.List(context.Background(), connect.NewRequest(&spec.ListRequest{}))
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Msg.Processes) == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("still running: %v", list.Msg.Processes)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

func TestAProcessOutlivesItsStream(t *testing.T) {
	c := client(t)
	ctx, cancel := context.WithCancel(context.Background())
	s, err := c.Start(ctx, connect.NewRequest(&spec.StartRequest{Process: bash("sleep 1; echo done")}))
	if err != nil {
		t.Fatal(err)
	}
	pid := follow(t, s, func(r *result) bool { return r.pid != 0 }).pid
	cancel()
	_ = s.Close()
	again, err := c.Connect(context.Background(), connect.NewRequest(&spec.ConnectRequest{Process: &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: pid}}}))
	if err != nil {
		t.Fatal(err)
	}
	r := follow(t, again, nil)
	if r.stdout != "done\n" || r.end == nil || r.end.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
}

func TestPTY(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s := start(t, c, &spec.StartRequest{
		Process: &spec.ProcessConfig{Cmd: "/bin/sh", Envs: map[string]string{"PS1": "$ "}},
		Pty:     &spec.PTY{Size: &spec.PTY_Size{Cols: 80, Rows: 24}},
	})
	pid := follow(t, s, func(r *result) bool { return r.pid != 0 }).pid
	sel := &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: pid}}
	if _, err := c.Update(ctx, connect.NewRequest(&spec.UpdateRequest{Process: sel, Pty: &spec.PTY{Size: &spec.PTY_Size{Cols: 100, Rows: 40}}})); err != nil {
		t.Fatal(err)
	}
	_, err := c.CloseStdin(ctx, connect.NewRequest(&spec.CloseStdinRequest{Process: sel}))
	if code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("close stdin of a PTY: %v", err)
	}
	if _, err := c.SendInput(ctx, connect.NewRequest(&spec.SendInputRequest{Process: sel, Input: &spec.ProcessInput{Input: &spec.ProcessInput_Pty{Pty: []byte("stty size; exit 7\n")}}})); err != nil {
		t.Fatal(err)
	}
	r := follow(t, s, nil)
	if !strings.Contains(r.pty, "40 100") || r.end == nil || r.end.ExitCode != 7 {
		t.Fatalf("%+v", r)
	}
	_, err = c.Update(ctx, connect.NewRequest(&spec.UpdateRequest{Process: sel, Pty: &spec.PTY{Size: &spec.PTY_Size{Cols: 1, Rows: 1}}}))
	if code(err) != connect.CodeNotFound {
		t.Fatalf("resize of an ended process: %v", err)
	}
}

func TestKeepalives(t *testing.T) {
	c := client(t)
	s := start(t, c, &spec.StartRequest{Process: bash("sleep 2.5")}, "Keepalive-Ping-Interval", "1")
	if r := follow(t, s, nil); r.keepalives < 1 || r.end == nil {
		t.Fatalf("%+v", r)
	}
}

func TestStreamInput(t *testing.T) {
	c := client(t)
	ctx := context.Background()
	s := start(t, c, &spec.StartRequest{Process: bash("head -c 6")})
	pid := follow(t, s, func(r *result) bool { return r.pid != 0 }).pid
	in := c.StreamInput(ctx)
	sel := &spec.ProcessSelector{Selector: &spec.ProcessSelector_Pid{Pid: pid}}
	for _, m := range []*spec.StreamInputRequest{
		{Event: &spec.StreamInputRequest_Start{Start: &spec.StreamInputRequest_StartEvent{Process: sel}}},
		{Event: &spec.StreamInputRequest_Keepalive{Keepalive: &spec.StreamInputRequest_KeepAlive{}}},
		{Event: &spec.StreamInputRequest_Data{Data: &spec.StreamInputRequest_DataEvent{Input: &spec.ProcessInput{Input: &spec.ProcessInput_Stdin{Stdin: []byte("abc")}}}}},
		{Event: &spec.StreamInputRequest_Data{Data: &spec.StreamInputRequest_DataEvent{Input: &spec.ProcessInput{Input: &spec.ProcessInput_Stdin{Stdin: []byte("def")}}}}},
	} {
		if err := in.Send(m); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := in.CloseAndReceive(); err != nil {
		t.Fatal(err)
	}
	if r := follow(t, s, nil); r.stdout != "abcdef" || r.end.ExitCode != 0 {
		t.Fatalf("%+v", r)
	}
	early := c.StreamInput(ctx)
	_ = early.Send(&spec.StreamInputRequest{Event: &spec.StreamInputRequest_Data{Data: &spec.StreamInputRequest_DataEvent{Input: &spec.ProcessInput{Input: &spec.ProcessInput_Stdin{Stdin: []byte("x")}}}}})
	if _, err := early.CloseAndReceive(); code(err) != connect.CodeFailedPrecondition {
		t.Fatalf("input before start: %v", err)
	}
}

func ptr(s string) *string { return &s }
func ptrBool(b bool) *bool { return &b }

func TestReapWaitsForOrphansOnly(t *testing.T) {
	s := New(core.NewSession(nil))
	// A child of this process that nobody waits for, as an orphan handed to podd would be.
	orphan, err := os.StartProcess("/bin/true", []string{"true"}, &os.ProcAttr{})
	if err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for !contains(zombies(os.Getpid()), orphan.Pid) {
		if time.Now().After(deadline) {
			t.Fatal("the child never became a zombie")
		}
		time.Sleep(10 * time.Millisecond)
	}
	s.reap()
	if contains(zombies(os.Getpid()), orphan.Pid) {
		t.Fatal("the orphan is still a zombie")
	}
}

func contains(pids []int, pid int) bool {
	for _, p := range pids {
		if p == pid {
			return true
		}
	}
	return false
}
