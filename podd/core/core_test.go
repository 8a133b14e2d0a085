package core

import (
	"errors"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
)

func TestResolve(t *testing.T) {
	u := &User{Name: "user", Home: "/home/user"}
	cases := []struct{ path, workdir, want string }{
		{"", "", "/home/user"},
		{"", "/work", "/work"},
		{"~", "", "/home/user"},
		{"~/a/b", "", "/home/user/a/b"},
		{"a.txt", "/work", "/home/user/a.txt"},
		{"../x", "", "/home/x"},
		{"/etc/hosts", "", "/etc/hosts"},
	}
	for _, c := range cases {
		got, err := Resolve(c.path, u, c.workdir)
		if err != nil || got != c.want {
			t.Errorf("Resolve(%q, %q) = %q, %v; want %q", c.path, c.workdir, got, err, c.want)
		}
	}
	if _, err := Resolve("~root/x", u, ""); !errors.Is(err, ErrOtherHome) {
		t.Fatalf("another's home: %v", err)
	}
}

func TestRequestedUser(t *testing.T) {
	for header, want := range map[string]string{
		"":                     "",
		"Basic dXNlcjo=":       "user", // "user:"
		"basic cm9vdDpwdw==":   "root", // "root:pw"
		"Bearer dXNlcjo=":      "",
		"Basic not-base64!!!!": "",
	} {
		h := http.Header{}
		if header != "" {
			h.Set("Authorization", header)
		}
		if got := RequestedUser(h); got != want {
			t.Errorf("%q: %q, want %q", header, got, want)
		}
	}
}

func TestSession(t *testing.T) {
	s := NewSession(map[string]string{"E2B_SANDBOX": "true"})
	if !s.Authorized(http.Header{}) {
		t.Fatal("no token yet: everything passes")
	}
	token := "t1"
	if err := s.Apply(Init{AccessToken: &token, EnvVars: map[string]string{"A": "1", "E2B_SANDBOX": "false"}}); err != nil {
		t.Fatal(err)
	}
	if s.Authorized(http.Header{}) || !s.Authorized(http.Header{"X-Access-Token": {"t1"}}) {
		t.Fatal("the token is required")
	}
	if err := s.Apply(Init{EnvVars: map[string]string{"B": "2"}, DefaultWorkdir: "/tmp"}); err != nil {
		t.Fatal(err)
	}
	if got := s.Envs(); len(got) != 2 || got["B"] != "2" || got["E2B_SANDBOX"] != "true" {
		t.Fatalf("envs replace the last set and never podd's own: %v", got)
	}
	if s.Token() != "t1" || s.Workdir() != "/tmp" {
		t.Fatal("an /init without a token keeps it")
	}
	if err := s.Apply(Init{DefaultWorkdir: "relative"}); err == nil {
		t.Fatal("a relative workdir")
	}
	root, err := s.User(http.Header{})
	if err != nil || root.Name != "root" || root.UID != 0 {
		t.Fatalf("default user: %v %v", root, err)
	}
	t.Setenv("HTTP_PROXY", "http://127.0.0.1:15001")
	t.Setenv("CUBEPOD_POD_UID", "pod")
	env := strings.Join(s.Env(root), "\n")
	if !strings.Contains(env, "HTTP_PROXY=http://127.0.0.1:15001") || strings.Contains(env, "CUBEPOD_POD_UID") {
		t.Fatalf("the container's environment, without podd's settings: %s", env)
	}
	if !strings.Contains(env, "HOME="+root.Home) || !strings.Contains(env, "B=2") || !strings.Contains(env, "E2B_SANDBOX=true") {
		t.Fatalf("env: %s", env)
	}
	if err := s.Apply(Init{DefaultUser: "nobody-at-all"}); err == nil || !strings.Contains(err.Error(), "not an account") {
		t.Fatalf("a default user the image lacks: %v", err)
	}
	if u, err := s.User(http.Header{}); err != nil || u.Name != "root" {
		t.Fatalf("a refused /init changes nothing: %v %v", u, err)
	}
}

func TestEnsureDirs(t *testing.T) {
	root := t.TempDir()
	u := &User{UID: uint32(os.Getuid()), GID: uint32(os.Getgid())}
	if err := EnsureDirs(filepath.Join(root, "a/b/c"), u); err != nil {
		t.Fatal(err)
	}
	if info, err := os.Stat(filepath.Join(root, "a/b/c")); err != nil || !info.IsDir() {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, "f"), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := EnsureDirs(filepath.Join(root, "f/g"), u); err == nil || !strings.Contains(err.Error(), "path is a file") {
		t.Fatalf("under a file: %v", err)
	}
}

func TestGiveWorkspace(t *testing.T) {
	dir := t.TempDir()
	u := &User{Name: "user", UID: 1000, GID: 1000}
	if err := GiveWorkspace(dir, u); err != nil {
		t.Fatal(err)
	}
	info, _ := os.Stat(dir)
	if st := info.Sys().(*syscall.Stat_t); st.Uid != 1000 || st.Gid != 1000 {
		t.Fatalf("owner %d:%d", st.Uid, st.Gid)
	}
	if err := os.Lchown(dir, 1001, 1001); err != nil {
		t.Fatal(err)
	}
	if err := GiveWorkspace(dir, u); err != nil {
		t.Fatal(err)
	}
	info, _ = os.Stat(dir)
	if st := info.Sys().(*syscall.Stat_t); st.Uid != 1001 {
		t.Fatalf("someone's workspace was taken: %d", st.Uid)
	}
	if err := GiveWorkspace(filepath.Join(dir, "none"), u); err != nil {
		t.Fatalf("no workspace: %v", err)
	}
}
