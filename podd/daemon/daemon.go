// Package daemon is podd's front: one HTTP server on envd's port that checks every request
// (the gateway's control credential, then the access token, then the user it names) and hands
// it to the service it is for, plus the endpoints of envd's own: /health, /init, /envs, /metrics.
package daemon

import (
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"strings"

	"connectrpc.com/connect"

	"cubepod.local/podd/control"
	"cubepod.local/podd/core"
	"cubepod.local/podd/files"
	"cubepod.local/podd/filesystem"
	"cubepod.local/podd/process"
	"cubepod.local/podd/spec/filesystem/filesystemconnect"
	"cubepod.local/podd/spec/process/processconnect"
)

// Version is the envd version podd answers for (X-Envd-Version), the one whose calls it serves.
const Version = "0.6.13"

// maxMessage bounds one RPC message; file contents go through /files, not RPCs.
const maxMessage = 16 << 20

// Daemon routes podd's requests.
type Daemon struct {
	guard     *control.Guard
	session   *core.Session
	mux       *http.ServeMux
	host      *host
	processes *process.Service
	// workspace is the directory /init hands to the default user (core.Workspace).
	workspace string
	// root is the sandbox's root, where /init's CA is installed ("/").
	root string
}

// New is the daemon of one sandbox: its credential guard and its session.
func New(guard *control.Guard, session *core.Session) *Daemon {
	d := &Daemon{guard: guard, session: session, mux: http.NewServeMux(), host: newHost(), workspace: core.Workspace, root: "/"}
	opts := []connect.HandlerOption{connect.WithReadMaxBytes(maxMessage)}
	d.mux.Handle(filesystemconnect.NewFilesystemHandler(filesystem.New(session), opts...))
	d.processes = process.New(session)
	d.mux.Handle(processconnect.NewProcessHandler(d.processes, opts...))
	d.mux.Handle("/files", files.New(session))
	d.mux.HandleFunc("GET /envs", d.envs)
	d.mux.HandleFunc("GET /metrics", d.metrics)
	return d
}

// MeasureDisk makes the filesystem at path the sandbox's disk in /metrics: where its root's
// writes land (the rootfs volume), not the image's root.
func (d *Daemon) MeasureDisk(path string) { d.host.disk = path }

// ReapOrphans makes the daemon wait for the processes the sandbox leaves behind, which become
// its children when it is the container's first process.
func (d *Daemon) ReapOrphans() { d.processes.ReapOrphans() }

// rpc says whether a request is a Connect call (errors are then answered in Connect's format).
func rpc(r *http.Request) bool {
	return strings.HasPrefix(r.URL.Path, "/filesystem.Filesystem/") || strings.HasPrefix(r.URL.Path, "/process.Process/")
}

func (d *Daemon) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.URL.Path == "/health" && r.Method == http.MethodGet {
		w.Header().Set("Cache-Control", "no-store")
		w.WriteHeader(http.StatusNoContent)
		return
	}
	w.Header().Set("X-Envd-Version", Version)
	credential := r.Header.Get(control.Header)
	if r.URL.Path == "/init" {
		if r.Method != http.MethodPost {
			d.refuse(w, r, http.StatusMethodNotAllowed, "POST /init only")
			return
		}
		if err := d.guard.Bind(credential); err != nil {
			d.refuseGuard(w, r, err)
			return
		}
		d.init(w, r)
		return
	}
	if err := d.guard.Check(credential); err != nil {
		d.refuseGuard(w, r, err)
		return
	}
	if r.URL.Path != "/files" && !d.session.Authorized(r.Header) {
		d.refuse(w, r, http.StatusUnauthorized, "unauthorized access, please provide a valid access token or method signing if supported")
		return
	}
	if name := core.RequestedUser(r.Header); name != "" {
		if _, err := core.LookupUser(name); err != nil {
			d.refuse(w, r, http.StatusUnauthorized, err.Error())
			return
		}
	}
	d.mux.ServeHTTP(w, r)
}

func (d *Daemon) refuseGuard(w http.ResponseWriter, r *http.Request, err error) {
	var refusal *control.Refusal
	if errors.As(err, &refusal) {
		d.refuse(w, r, refusal.Status, refusal.Message)
		return
	}
	d.refuse(w, r, http.StatusForbidden, err.Error())
}

// refuse answers a request podd will not serve, in Connect's format for an RPC.
func (d *Daemon) refuse(w http.ResponseWriter, r *http.Request, status int, message string) {
	if rpc(r) {
		code := connect.CodePermissionDenied
		switch status {
		case http.StatusUnauthorized:
			code = connect.CodeUnauthenticated
		case http.StatusConflict:
			code = connect.CodeFailedPrecondition
		}
		_ = connect.NewErrorWriter().Write(w, r, connect.NewError(code, errors.New(message)))
		return
	}
	files.Write(w, status, message)
}

func (d *Daemon) init(w http.ResponseWriter, r *http.Request) {
	var body core.Init
	dec := json.NewDecoder(io.LimitReader(r.Body, 1<<20))
	if err := dec.Decode(&body); err != nil && !errors.Is(err, io.EOF) {
		files.Write(w, http.StatusBadRequest, "bad /init body: "+err.Error())
		return
	}
	var cas [][]byte
	if body.CABundle != nil {
		var err error
		if cas, err = core.ParseCABundle(*body.CABundle); err != nil {
			files.Write(w, http.StatusBadRequest, "bad /init body: "+err.Error())
			return
		}
	}
	if err := d.session.Apply(body); err != nil {
		files.Write(w, http.StatusBadRequest, "bad /init body: "+err.Error())
		return
	}
	if body.CABundle != nil {
		if err := core.InstallCA(d.root, cas); err != nil {
			files.Write(w, http.StatusInternalServerError, "installing the egress CA: "+err.Error())
			return
		}
		d.session.SetCA(len(cas) > 0)
	}
	if body.DefaultUser != "" {
		if u, err := core.LookupUser(body.DefaultUser); err == nil {
			if err := core.GiveWorkspace(d.workspace, u); err != nil {
				files.Write(w, http.StatusInternalServerError, "handing "+d.workspace+" to "+u.Name+": "+err.Error())
				return
			}
		}
	}
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(http.StatusNoContent)
}

func (d *Daemon) envs(w http.ResponseWriter, _ *http.Request) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(d.session.Envs())
}

func (d *Daemon) metrics(w http.ResponseWriter, _ *http.Request) {
	m, err := d.host.sample()
	if err != nil {
		files.Write(w, http.StatusInternalServerError, err.Error())
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	_ = json.NewEncoder(w).Encode(m)
}
