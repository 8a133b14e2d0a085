// Command podd is CubePod's in-sandbox daemon: the part of E2B's envd that CubePod's operator,
// gateway and the E2B SDK use. It listens on CUBEPOD_ENVD_PORT (49983) on every address:
//
//	GET  /health                      204: the readiness probe's and the gateway's check
//	POST /init                        {envVars, accessToken}: environment for processes, and the
//	                                  token every later call must carry (X-Access-Token)
//	GET  /files?path=P                the file's bytes; 404 JSON when there is none
//	POST /files?path=P                writes the file (multipart part "file", or the raw body)
//	POST /process.Process/Start       runs a process, streaming its output (Connect, JSON)
//
// It is a static program with no dependency beyond Go's standard library, so that the
// podd-installer can copy it into any image.
package main

import (
	"bufio"
	"crypto/subtle"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

type daemon struct {
	mu    sync.RWMutex
	token string
	envs  map[string]string
}

func main() {
	port := os.Getenv("CUBEPOD_ENVD_PORT")
	if port == "" {
		port = "49983"
	}
	d := &daemon{envs: map[string]string{}}
	log.Printf("podd listening on :%s", port)
	log.Fatal(http.ListenAndServe(":"+port, d))
}

func (d *daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	switch {
	case r.Method == http.MethodGet && r.URL.Path == "/health":
		w.WriteHeader(http.StatusNoContent)
	case r.Method == http.MethodPost && r.URL.Path == "/init":
		d.init(w, r)
	case !d.authorized(r):
		fail(w, http.StatusUnauthorized, "missing or wrong X-Access-Token")
	case r.URL.Path == "/files" && r.Method == http.MethodGet:
		readFile(w, r)
	case r.URL.Path == "/files" && r.Method == http.MethodPost:
		writeFile(w, r)
	case r.URL.Path == "/process.Process/Start" && r.Method == http.MethodPost:
		d.start(w, r)
	default:
		fail(w, http.StatusNotFound, "podd has no "+r.Method+" "+r.URL.Path)
	}
}

func (d *daemon) init(w http.ResponseWriter, r *http.Request) {
	var body struct {
		EnvVars     map[string]string `json:"envVars"`
		AccessToken string            `json:"accessToken"`
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, 1<<20)).Decode(&body); err != nil {
		fail(w, http.StatusBadRequest, "bad /init body: "+err.Error())
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	// As envd: a second /init (the gateway's, after a resume) replaces the token and adds envs.
	if body.AccessToken != "" {
		d.token = body.AccessToken
	}
	for k, v := range body.EnvVars {
		d.envs[k] = v
	}
	w.WriteHeader(http.StatusNoContent)
}

func (d *daemon) authorized(r *http.Request) bool {
	d.mu.RLock()
	defer d.mu.RUnlock()
	got := r.Header.Get("X-Access-Token")
	return d.token == "" || subtle.ConstantTimeCompare([]byte(got), []byte(d.token)) == 1
}

func readFile(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		fail(w, http.StatusNotFound, "no file "+path)
		return
	}
	if err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	defer f.Close()
	w.Header().Set("Content-Type", "application/octet-stream")
	_, _ = io.Copy(w, f)
}

func writeFile(w http.ResponseWriter, r *http.Request) {
	path := r.URL.Query().Get("path")
	body := io.Reader(r.Body)
	media, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	if media == "multipart/form-data" {
		part, err := multipart.NewReader(r.Body, params["boundary"]).NextPart()
		if err != nil {
			fail(w, http.StatusBadRequest, "no file part: "+err.Error())
			return
		}
		if path == "" {
			path = part.FileName()
		}
		body = part
	}
	if !filepath.IsAbs(path) {
		fail(w, http.StatusBadRequest, "path must be absolute: "+path)
		return
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		fail(w, http.StatusBadRequest, err.Error())
		return
	}
	f, err := os.Create(path)
	if err == nil {
		_, err = io.Copy(f, body)
		err = errors.Join(err, f.Sync(), f.Close())
	}
	if err != nil {
		fail(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	_ = json.NewEncoder(w).Encode([]map[string]string{
		{"name": filepath.Base(path), "type": "file", "path": path},
	})
}

// start runs a process and streams Connect's server-streaming JSON envelopes: start, data,
// end, then the end-of-stream envelope.
func (d *daemon) start(w http.ResponseWriter, r *http.Request) {
	var req struct {
		Process struct {
			Cmd  string            `json:"cmd"`
			Args []string          `json:"args"`
			Envs map[string]string `json:"envs"`
			Cwd  string            `json:"cwd"`
		} `json:"process"`
	}
	head := make([]byte, 5)
	if _, err := io.ReadFull(r.Body, head); err != nil {
		fail(w, http.StatusBadRequest, "no Connect envelope")
		return
	}
	if err := json.NewDecoder(io.LimitReader(r.Body, int64(binary.BigEndian.Uint32(head[1:])))).Decode(&req); err != nil {
		fail(w, http.StatusBadRequest, "bad StartRequest: "+err.Error())
		return
	}
	cmd := exec.Command(req.Process.Cmd, req.Process.Args...)
	cmd.Dir = req.Process.Cwd
	cmd.Env = os.Environ()
	d.mu.RLock()
	for k, v := range d.envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	d.mu.RUnlock()
	for k, v := range req.Process.Envs {
		cmd.Env = append(cmd.Env, k+"="+v)
	}
	stdout, _ := cmd.StdoutPipe()
	stderr, _ := cmd.StderrPipe()
	w.Header().Set("Content-Type", "application/connect+json")
	out := &stream{w: w}
	if err := cmd.Start(); err != nil {
		out.send(map[string]any{"event": map[string]any{"end": map[string]any{
			"exitCode": 127, "exited": true, "status": "exit status 127", "error": err.Error()}}})
		out.close()
		return
	}
	out.send(map[string]any{"event": map[string]any{"start": map[string]any{"pid": cmd.Process.Pid}}})
	var wg sync.WaitGroup
	for name, pipe := range map[string]io.Reader{"stdout": stdout, "stderr": stderr} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			buf := bufio.NewReader(pipe)
			chunk := make([]byte, 32<<10)
			for {
				n, err := buf.Read(chunk)
				if n > 0 {
					out.send(map[string]any{"event": map[string]any{"data": map[string]string{
						name: base64.StdEncoding.EncodeToString(chunk[:n])}}})
				}
				if err != nil {
					return
				}
			}
		}()
	}
	wg.Wait()
	err := cmd.Wait()
	code := cmd.ProcessState.ExitCode()
	end := map[string]any{"exitCode": code, "exited": true, "status": fmt.Sprintf("exit status %d", code)}
	if err != nil && code < 0 {
		end["status"] = err.Error()
	}
	out.send(map[string]any{"event": map[string]any{"end": end}})
	out.close()
}

type stream struct {
	mu sync.Mutex
	w  http.ResponseWriter
}

func (s *stream) envelope(flags byte, message any) {
	body, _ := json.Marshal(message)
	head := make([]byte, 5)
	head[0] = flags
	binary.BigEndian.PutUint32(head[1:], uint32(len(body)))
	s.mu.Lock()
	defer s.mu.Unlock()
	_, _ = s.w.Write(append(head, body...))
	if f, ok := s.w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *stream) send(message any) { s.envelope(0, message) }
func (s *stream) close()           { s.envelope(0x02, map[string]any{}) }

func fail(w http.ResponseWriter, code int, message string) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": code, "message": strings.TrimSpace(message)})
}
