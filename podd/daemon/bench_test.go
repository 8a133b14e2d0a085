package daemon

import (
	"bufio"
	"context"
	"crypto/ed25519"
	"encoding/base64"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"strings"
	"testing"

	"connectrpc.com/connect"

	"cubepod.local/podd/control"
	"cubepod.local/podd/core"
	"cubepod.local/podd/spec/process"
	"cubepod.local/podd/spec/process/processconnect"
)

// The command round trip that `npm run bench -- sandbox` reads: what E2B's commands.run("true")
// asks of podd (a Connect JSON Start stream, credential, token and user checked, the process
// started, its events streamed until its end) against the least Go handler that does the same
// work over the same HTTP: start the process, wait for it, stream its start and end.
func BenchmarkCommandRoundTrip(b *testing.B) {
	b.Run("podd", func(b *testing.B) {
		pub, key, err := ed25519.GenerateKey(nil)
		if err != nil {
			b.Fatal(err)
		}
		d := New(control.NewGuard(pub, pod), core.NewSession(nil))
		srv := httptest.NewServer(d)
		defer srv.Close()
		credential := control.Sign(key, control.Grant{Box: box, Pod: pod})
		init, _ := http.NewRequest("POST", srv.URL+"/init", strings.NewReader(`{"accessToken":"tok"}`))
		init.Header.Set(control.Header, credential)
		if res, err := srv.Client().Do(init); err != nil || res.StatusCode != 204 {
			b.Fatalf("init: %v %v", res, err)
		}
		// The SDKs' Connect clients ask for no compression.
		c := processconnect.NewProcessClient(srv.Client(), srv.URL, connect.WithProtoJSON(), connect.WithAcceptCompression("gzip", nil, nil))
		root := "Basic " + base64.StdEncoding.EncodeToString([]byte("root:"))
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			req := connect.NewRequest(&process.StartRequest{Process: &process.ProcessConfig{Cmd: "/bin/sh", Args: []string{"-c", "true"}}})
			req.Header().Set(control.Header, credential)
			req.Header().Set("X-Access-Token", "tok")
			req.Header().Set("Authorization", root)
			s, err := c.Start(context.Background(), req)
			if err != nil {
				b.Fatal(err)
			}
			ended := false
			for s.Receive() {
				if s.Msg().GetEvent().GetEnd() != nil {
					ended = true
				}
			}
			if err := s.Err(); err != nil || !ended {
				b.Fatalf("stream: %v, ended %v", err, ended)
			}
			s.Close()
		}
	})
	b.Run("bare", func(b *testing.B) {
		srv := httptest.NewServer(http.HandlerFunc(bareStart))
		defer srv.Close()
		b.ResetTimer()
		for i := 0; i < b.N; i++ {
			res, err := srv.Client().Post(srv.URL, "application/json", strings.NewReader(`{"cmd":"/bin/sh","args":["-c","true"]}`))
			if err != nil {
				b.Fatal(err)
			}
			body, _ := io.ReadAll(res.Body)
			res.Body.Close()
			if !strings.Contains(string(body), `"exitCode":0`) {
				b.Fatalf("bare: %s", body)
			}
		}
	})
}

// bareStart is the floor: one process per request, its start and end as JSON lines.
func bareStart(w http.ResponseWriter, r *http.Request) {
	var in struct {
		Cmd  string   `json:"cmd"`
		Args []string `json:"args"`
	}
	if err := json.NewDecoder(r.Body).Decode(&in); err != nil {
		http.Error(w, err.Error(), http.StatusBadRequest)
		return
	}
	cmd := exec.Command(in.Cmd, in.Args...)
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	out := bufio.NewWriter(w)
	enc := json.NewEncoder(out)
	_ = enc.Encode(map[string]int{"pid": cmd.Process.Pid})
	_ = out.Flush()
	w.(http.Flusher).Flush()
	_, _ = io.Copy(io.Discard, stdout)
	_, _ = io.Copy(io.Discard, stderr)
	code := 0
	if err := cmd.Wait(); err != nil {
		code = cmd.ProcessState.ExitCode()
	}
	_ = enc.Encode(map[string]int{"exitCode": code})
	_ = out.Flush()
}
