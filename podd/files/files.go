// Package files is envd's /files endpoint: a file's bytes (GET) and uploads of one or several
// files (POST, multipart or a raw body, gzip either way), as a user, authorised by the access
// token or by the SDK's signed URL.
package files

import (
	"compress/gzip"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"mime"
	"mime/multipart"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"cubepod.local/podd/core"
)

// Handler serves /files.
type Handler struct {
	session *core.Session
	now     func() time.Time
}

// New is the handler for a session.
func New(session *core.Session) *Handler { return &Handler{session: session, now: time.Now} }

// Failure is an answer other than success: the status and envd's JSON error body.
type Failure struct {
	Status  int
	Message string
}

func (f *Failure) Error() string { return f.Message }

func failf(status int, format string, args ...any) *Failure {
	return &Failure{Status: status, Message: fmt.Sprintf(format, args...)}
}

// Write answers a failure as envd does.
func Write(w http.ResponseWriter, status int, message string) {
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	w.Header().Set("X-Content-Type-Options", "nosniff")
	w.WriteHeader(status)
	_ = json.NewEncoder(w).Encode(map[string]any{"code": status, "message": message})
}

func (h *Handler) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	var err error
	switch r.Method {
	case http.MethodGet:
		err = h.download(w, r)
	case http.MethodPost:
		err = h.upload(w, r)
	default:
		err = failf(http.StatusMethodNotAllowed, "method %s not allowed on /files", r.Method)
	}
	var f *Failure
	if errors.As(err, &f) {
		Write(w, f.Status, f.Message)
	} else if err != nil {
		Write(w, http.StatusInternalServerError, err.Error())
	}
}

// Signature is what E2B's SDKs put in a signed URL for a path, operation ("read" or "write"),
// user and expiry (0: none), keyed by the access token.
func Signature(path, operation, username, token string, expires int64) string {
	raw := path + ":" + operation + ":" + username + ":" + token
	if expires != 0 {
		raw += ":" + strconv.FormatInt(expires, 10)
	}
	sum := sha256.Sum256([]byte(raw))
	return "v1_" + base64.RawStdEncoding.EncodeToString(sum[:])
}

// authorize passes a request that carries the access token, or a valid, unexpired signature
// for its path, operation and user; anything while no token is set.
func (h *Handler) authorize(r *http.Request, operation string) error {
	token := h.session.Token()
	if token == "" {
		return nil
	}
	if got := r.Header.Get("X-Access-Token"); got != "" {
		if subtle.ConstantTimeCompare([]byte(got), []byte(token)) != 1 {
			return failf(http.StatusUnauthorized, "access token present in header but does not match")
		}
		return nil
	}
	q := r.URL.Query()
	signature := q.Get("signature")
	if signature == "" {
		return failf(http.StatusUnauthorized, "missing signature query parameter")
	}
	var expires int64
	if v := q.Get("signature_expiration"); v != "" {
		n, err := strconv.ParseInt(v, 10, 64)
		if err != nil {
			return failf(http.StatusBadRequest, "invalid signature_expiration %q: expected Unix seconds", v)
		}
		expires = n
	}
	want := Signature(q.Get("path"), operation, q.Get("username"), token, expires)
	if subtle.ConstantTimeCompare([]byte(signature), []byte(want)) != 1 {
		return failf(http.StatusUnauthorized, "invalid signature")
	}
	if expires != 0 && expires < h.now().Unix() {
		return failf(http.StatusUnauthorized, "signature is already expired")
	}
	return nil
}

// target is the request's user (`username`, else the one it names, else the default) and path.
func (h *Handler) target(r *http.Request, path string) (*core.User, string, error) {
	var u *core.User
	var err error
	if name := r.URL.Query().Get("username"); name != "" {
		u, err = core.LookupUser(name)
	} else {
		u, err = h.session.User(r.Header)
	}
	if err != nil {
		return nil, "", failf(http.StatusUnauthorized, "%v", err)
	}
	resolved, err := core.Resolve(path, u, h.session.Workdir())
	if err != nil {
		return nil, "", failf(http.StatusBadRequest, "%v", err)
	}
	return u, resolved, nil
}

func (h *Handler) download(w http.ResponseWriter, r *http.Request) error {
	if err := h.authorize(r, "read"); err != nil {
		return err
	}
	raw := r.URL.Query().Get("path")
	_, path, err := h.target(r, raw)
	if err != nil {
		return err
	}
	info, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return failf(http.StatusNotFound, "path '%s' does not exist", path)
	}
	if err != nil {
		return failf(http.StatusInternalServerError, "error checking path '%s': %v", path, err)
	}
	if info.IsDir() {
		return failf(http.StatusBadRequest, "path '%s' is a directory", path)
	}
	encoding, ok := negotiate(r)
	if !ok {
		return failf(http.StatusNotAcceptable, "no acceptable encoding found, supported: [gzip]")
	}
	f, err := os.Open(path)
	if err != nil {
		return failf(http.StatusInternalServerError, "error opening '%s': %v", path, err)
	}
	defer f.Close()
	w.Header().Set("Vary", "Accept-Encoding")
	w.Header().Set("Content-Disposition", mime.FormatMediaType("inline", map[string]string{"filename": filepath.Base(path)}))
	if encoding != "gzip" {
		http.ServeContent(w, r, path, info.ModTime(), f)
		return nil
	}
	kind := mime.TypeByExtension(filepath.Ext(path))
	if kind == "" {
		kind = "application/octet-stream"
	}
	w.Header().Set("Content-Type", kind)
	w.Header().Set("Content-Encoding", "gzip")
	gz := gzip.NewWriter(w)
	if _, err := io.Copy(gz, f); err != nil {
		return nil // the response has begun: the client sees a cut stream
	}
	_ = gz.Close()
	return nil
}

// negotiate picks gzip when the client accepts it (and asks for the whole file), else identity;
// false when the client accepts neither.
func negotiate(r *http.Request) (string, bool) {
	header := r.Header.Get("Accept-Encoding")
	gzipQ, identityQ, starQ := -1.0, -1.0, -1.0
	for _, part := range strings.Split(header, ",") {
		name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
		q := 1.0
		if v, ok := strings.CutPrefix(strings.TrimSpace(params), "q="); ok {
			if f, err := strconv.ParseFloat(v, 64); err == nil {
				q = f
			}
		}
		switch strings.ToLower(strings.TrimSpace(name)) {
		case "gzip", "x-gzip":
			gzipQ = q
		case "identity":
			identityQ = q
		case "*":
			starQ = q
		}
	}
	if gzipQ < 0 {
		gzipQ = starQ
	}
	identity := identityQ != 0 && !(identityQ < 0 && starQ == 0)
	partial := r.Header.Get("Range") != "" || r.Header.Get("If-Modified-Since") != "" ||
		r.Header.Get("If-None-Match") != "" || r.Header.Get("If-Range") != ""
	switch {
	case partial:
		return "identity", identity
	case gzipQ > 0:
		return "gzip", true
	}
	return "identity", identity
}

// Written is one uploaded file, as envd lists it.
type Written struct {
	Path     string            `json:"path"`
	Name     string            `json:"name"`
	Type     string            `json:"type"`
	Metadata map[string]string `json:"metadata,omitempty"`
}

func (h *Handler) upload(w http.ResponseWriter, r *http.Request) error {
	if err := h.authorize(r, "write"); err != nil {
		return err
	}
	raw := r.URL.Query().Get("path")
	u, path, err := h.target(r, raw)
	if err != nil {
		return err
	}
	meta, err := metadataOf(r.Header)
	if err != nil {
		return err
	}
	body := io.Reader(r.Body)
	switch enc := strings.ToLower(strings.TrimSpace(r.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
	case "gzip":
		gz, err := gzip.NewReader(r.Body)
		if err != nil {
			return failf(http.StatusBadRequest, "error decompressing request body: %v", err)
		}
		defer gz.Close()
		body = gz
	default:
		return failf(http.StatusBadRequest, "error decompressing request body: unsupported Content-Encoding %q (gzip or identity)", enc)
	}
	media, params, _ := mime.ParseMediaType(r.Header.Get("Content-Type"))
	var written []Written
	switch {
	case media == "application/octet-stream":
		if raw == "" {
			return failf(http.StatusBadRequest, "path query parameter is required for raw body upload")
		}
		if err := writeOne(path, body, u, meta); err != nil {
			return err
		}
		written = append(written, Written{Path: path, Name: filepath.Base(path), Type: "file", Metadata: meta})
	case strings.HasPrefix(media, "multipart/"):
		parts := multipart.NewReader(body, params["boundary"])
		seen := map[string]bool{}
		for {
			part, err := parts.NextPart()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				return failf(http.StatusBadRequest, "error reading multipart body: %v", err)
			}
			if part.FormName() != "file" {
				continue
			}
			dest := path
			if raw == "" {
				name := fileName(part)
				if name == "" {
					return failf(http.StatusBadRequest, "a file part has no filename and the request no path")
				}
				if dest, err = core.Resolve(name, u, h.session.Workdir()); err != nil {
					return failf(http.StatusBadRequest, "%v", err)
				}
			}
			if seen[dest] {
				return failf(http.StatusBadRequest, "you cannot upload multiple files to the same path '%s' in one upload request", dest)
			}
			seen[dest] = true
			if err := writeOne(dest, part, u, meta); err != nil {
				return err
			}
			written = append(written, Written{Path: dest, Name: filepath.Base(dest), Type: "file", Metadata: meta})
		}
	default:
		return failf(http.StatusBadRequest, "unsupported content type: %q (multipart/form-data or application/octet-stream)", media)
	}
	if written == nil {
		written = []Written{}
	}
	w.Header().Set("Content-Type", "application/json")
	return json.NewEncoder(w).Encode(written)
}

// fileName is a part's filename as the SDKs send it: a whole path, which mime/multipart's
// FileName would cut to its last element.
func fileName(p *multipart.Part) string {
	_, params, err := mime.ParseMediaType(p.Header.Get("Content-Disposition"))
	if err != nil {
		return ""
	}
	return params["filename"]
}

// writeOne writes a file for the user: missing directories made and owned by them, the file
// replaced in place, its metadata replaced by the request's.
func writeOne(path string, body io.Reader, u *core.User, meta map[string]string) error {
	if err := core.EnsureDirs(filepath.Dir(path), u); err != nil {
		return failf(http.StatusInternalServerError, "error ensuring directories: %v", err)
	}
	if info, err := os.Stat(path); err == nil && info.IsDir() {
		return failf(http.StatusBadRequest, "path is a directory: %s", path)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o666)
	if err != nil {
		if errors.Is(err, syscall.ENOSPC) {
			return failf(http.StatusInsufficientStorage, "not enough inodes available")
		}
		return failf(http.StatusInternalServerError, "error opening file: %v", err)
	}
	_ = f.Chown(int(u.UID), int(u.GID))
	_, err = io.Copy(f, body)
	err = errors.Join(err, f.Close())
	if errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) {
		return failf(http.StatusInsufficientStorage, "not enough disk space available")
	}
	if err != nil {
		return failf(http.StatusInternalServerError, "error writing file: %v", err)
	}
	return setMetadata(path, meta)
}

// Metadata limits of envd: printable ASCII, and what fits the kernel's extended attributes.
const (
	metadataPrefix = "user.e2b."
	maxKey         = 246
	maxMetadata    = 4096
)

func metadataOf(h http.Header) (map[string]string, error) {
	meta := map[string]string{}
	total := 0
	for name, values := range h {
		key, ok := strings.CutPrefix(strings.ToLower(name), "x-metadata-")
		if !ok || len(values) == 0 {
			continue
		}
		v := values[0]
		if key == "" || len(key) > maxKey || !printable(key) || !printable(v) {
			return nil, failf(http.StatusBadRequest, "invalid metadata: key %q: keys of at most %d and values of printable ASCII", key, maxKey)
		}
		total += len(metadataPrefix) + len(key) + len(v)
		meta[key] = v
	}
	if total > maxMetadata {
		return nil, failf(http.StatusBadRequest, "invalid metadata: %d bytes in all, at most %d", total, maxMetadata)
	}
	if len(meta) == 0 {
		return nil, nil
	}
	return meta, nil
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < 0x20 || s[i] > 0x7e {
			return false
		}
	}
	return true
}

// setMetadata replaces a file's E2B metadata; a filesystem without extended attributes keeps none.
func setMetadata(path string, meta map[string]string) error {
	size, err := unix.Listxattr(path, nil)
	if err == nil && size > 0 {
		buf := make([]byte, size)
		if n, err := unix.Listxattr(path, buf); err == nil {
			for _, name := range strings.Split(string(buf[:n]), "\x00") {
				if strings.HasPrefix(name, metadataPrefix) {
					_ = unix.Removexattr(path, name)
				}
			}
		}
	}
	for k, v := range meta {
		err := unix.Setxattr(path, metadataPrefix+k, []byte(v), 0)
		switch {
		case err == nil, errors.Is(err, unix.ENOTSUP):
		case errors.Is(err, unix.ENOSPC), errors.Is(err, unix.EDQUOT):
			return failf(http.StatusInsufficientStorage, "not enough space for the file's metadata")
		default:
			return failf(http.StatusInternalServerError, "error writing metadata: %v", err)
		}
	}
	return nil
}
