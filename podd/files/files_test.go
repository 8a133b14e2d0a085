package files

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"io"
	"mime/multipart"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"cubepod.local/podd/core"
)

func server(t *testing.T, token string) (*httptest.Server, *Handler) {
	t.Helper()
	s := core.NewSession(nil)
	if token != "" {
		if err := s.Apply(core.Init{AccessToken: &token}); err != nil {
			t.Fatal(err)
		}
	}
	h := New(s)
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, h
}

func do(t *testing.T, req *http.Request) (*http.Response, []byte) {
	t.Helper()
	res, err := http.DefaultTransport.RoundTrip(req) // no transparent gzip: the test sees the wire
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	body, _ := io.ReadAll(res.Body)
	return res, body
}

func get(t *testing.T, srv *httptest.Server, q url.Values, header ...string) (*http.Response, []byte) {
	req, _ := http.NewRequest(http.MethodGet, srv.URL+"/files?"+q.Encode(), nil)
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	return do(t, req)
}

func TestUploadMultipartSeveralFilesAndDownload(t *testing.T) {
	srv, _ := server(t, "")
	dir := t.TempDir()
	var body bytes.Buffer
	mw := multipart.NewWriter(&body)
	for name, content := range map[string]string{filepath.Join(dir, "a/one.txt"): "1", filepath.Join(dir, "b/two.txt"): "22"} {
		w, _ := mw.CreateFormFile("file", name)
		_, _ = w.Write([]byte(content))
	}
	_ = mw.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/files", &body)
	req.Header.Set("Content-Type", mw.FormDataContentType())
	res, out := do(t, req)
	if res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, out)
	}
	var written []Written
	if err := json.Unmarshal(out, &written); err != nil || len(written) != 2 {
		t.Fatalf("%s: %v", out, err)
	}
	res, got := get(t, srv, url.Values{"path": {filepath.Join(dir, "b/two.txt")}}, "Accept-Encoding", "identity")
	if res.StatusCode != 200 || string(got) != "22" || res.Header.Get("Content-Length") != "2" {
		t.Fatalf("%d %q %v", res.StatusCode, got, res.Header)
	}
}

func TestUploadGzipOctetStreamAndGzipDownload(t *testing.T) {
	srv, _ := server(t, "")
	path := filepath.Join(t.TempDir(), "deep/z.bin")
	var zipped bytes.Buffer
	gz := gzip.NewWriter(&zipped)
	_, _ = gz.Write(bytes.Repeat([]byte("z"), 100000))
	_ = gz.Close()
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/files?path="+url.QueryEscape(path), &zipped)
	req.Header.Set("Content-Type", "application/octet-stream")
	req.Header.Set("Content-Encoding", "gzip")
	req.Header.Set("X-Metadata-Owner", "agent")
	if res, out := do(t, req); res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, out)
	}
	if info, err := os.Stat(path); err != nil || info.Size() != 100000 {
		t.Fatalf("%v %v", info, err)
	}
	res, got := get(t, srv, url.Values{"path": {path}}, "Accept-Encoding", "br, gzip, deflate")
	if res.Header.Get("Content-Encoding") != "gzip" {
		t.Fatalf("not gzip: %v", res.Header)
	}
	r, err := gzip.NewReader(bytes.NewReader(got))
	if err != nil {
		t.Fatal(err)
	}
	plain, _ := io.ReadAll(r)
	if len(plain) != 100000 {
		t.Fatalf("%d bytes", len(plain))
	}
	res, _ = get(t, srv, url.Values{"path": {path}}, "Accept-Encoding", "br;q=1, identity;q=0")
	if res.StatusCode != http.StatusNotAcceptable {
		t.Fatalf("nothing acceptable: %d", res.StatusCode)
	}
}

func TestRefusals(t *testing.T) {
	srv, _ := server(t, "")
	dir := t.TempDir()
	cases := map[string]struct {
		method, query, contentType, encoding string
		want                                 int
	}{
		"missing file":       {"GET", "path=" + url.QueryEscape(dir+"/none"), "", "", 404},
		"a directory":        {"GET", "path=" + url.QueryEscape(dir), "", "", 400},
		"unknown user":       {"GET", "path=x&username=nobody-at-all", "", "", 401},
		"other home":         {"GET", "path=~nobody/x", "", "", 400},
		"raw without path":   {"POST", "", "application/octet-stream", "", 400},
		"upload over a dir":  {"POST", "path=" + url.QueryEscape(dir), "application/octet-stream", "", 400},
		"unknown encoding":   {"POST", "path=" + url.QueryEscape(dir+"/f"), "application/octet-stream", "br", 400},
		"bad gzip":           {"POST", "path=" + url.QueryEscape(dir+"/f"), "application/octet-stream", "gzip", 400},
		"unknown media type": {"POST", "path=" + url.QueryEscape(dir+"/f"), "text/plain", "", 400},
		"not a method":       {"DELETE", "path=x", "", "", 405},
	}
	for name, tc := range cases {
		req, _ := http.NewRequest(tc.method, srv.URL+"/files?"+tc.query, bytes.NewReader([]byte("data")))
		if tc.contentType != "" {
			req.Header.Set("Content-Type", tc.contentType)
		}
		if tc.encoding != "" {
			req.Header.Set("Content-Encoding", tc.encoding)
		}
		res, out := do(t, req)
		var e struct {
			Code    int    `json:"code"`
			Message string `json:"message"`
		}
		if res.StatusCode != tc.want || json.Unmarshal(out, &e) != nil || e.Code != tc.want || e.Message == "" {
			t.Errorf("%s: %d %s, want %d", name, res.StatusCode, out, tc.want)
		}
	}
	if _, err := os.Stat(dir + "/f"); !os.IsNotExist(err) {
		t.Fatalf("a refused upload wrote: %v", err)
	}
}

func TestRelativePathsAreInTheHome(t *testing.T) {
	srv, _ := server(t, "")
	root, _ := core.LookupUser("root")
	name := "podd-files-test-" + strconv.FormatInt(time.Now().UnixNano(), 36)
	t.Cleanup(func() { _ = os.Remove(filepath.Join(root.Home, name)) })
	req, _ := http.NewRequest(http.MethodPost, srv.URL+"/files?path="+name, bytes.NewReader([]byte("home")))
	req.Header.Set("Content-Type", "application/octet-stream")
	res, out := do(t, req)
	if res.StatusCode != 200 {
		t.Fatalf("%d %s", res.StatusCode, out)
	}
	if got, err := os.ReadFile(filepath.Join(root.Home, name)); err != nil || string(got) != "home" {
		t.Fatalf("%q %v", got, err)
	}
}

func TestTokenAndSignedURLs(t *testing.T) {
	srv, h := server(t, "secret-token")
	path := filepath.Join(t.TempDir(), "signed.txt")
	if err := os.WriteFile(path, []byte("signed"), 0o644); err != nil {
		t.Fatal(err)
	}
	h.now = func() time.Time { return time.Unix(1000, 0) }
	q := func(sig string, exp int64) url.Values {
		v := url.Values{"path": {path}, "signature": {sig}}
		if exp != 0 {
			v.Set("signature_expiration", strconv.FormatInt(exp, 10))
		}
		return v
	}
	cases := map[string]struct {
		query  url.Values
		header []string
		want   int
	}{
		"nothing":              {url.Values{"path": {path}}, nil, 401},
		"the token":            {url.Values{"path": {path}}, []string{"X-Access-Token", "secret-token"}, 200},
		"a wrong token":        {url.Values{"path": {path}}, []string{"X-Access-Token", "guess"}, 401},
		"a signature":          {q(Signature(path, "read", "", "secret-token", 0), 0), nil, 200},
		"unexpired":            {q(Signature(path, "read", "", "secret-token", 2000), 2000), nil, 200},
		"expired":              {q(Signature(path, "read", "", "secret-token", 999), 999), nil, 401},
		"for writing":          {q(Signature(path, "write", "", "secret-token", 0), 0), nil, 401},
		"another token's":      {q(Signature(path, "read", "", "other", 0), 0), nil, 401},
		"a malformed expiry":   {url.Values{"path": {path}, "signature": {"v1_x"}, "signature_expiration": {"soon"}}, nil, 400},
		"exp not signed along": {q(Signature(path, "read", "", "secret-token", 0), 2000), nil, 401},
	}
	for name, tc := range cases {
		if res, out := get(t, srv, tc.query, tc.header...); res.StatusCode != tc.want {
			t.Errorf("%s: %d %s, want %d", name, res.StatusCode, out, tc.want)
		}
	}
}

// The signature E2B's JS SDK 2.51.0 makes (getSignature) for these inputs, computed with it.
func TestSignatureMatchesTheSDK(t *testing.T) {
	if got := Signature("/home/user/a.txt", "read", "user", "tok", 1700000000); got != sdkSignature {
		t.Fatalf("%s, want %s", got, sdkSignature)
	}
}

// node -e 'require("e2b").getSignature({path:"/home/user/a.txt", operation:"read", user:"user",
// expirationInSeconds: 1000, envdAccessToken:"tok"})' with Date.now() at 1699999000 s, e2b 2.51.0.
const sdkSignature = "v1_rjyaqcqTmWCotSjgdIM5sPngpduJ8ZZz/orD09SpFng"
