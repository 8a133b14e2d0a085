package core

import (
	"crypto/subtle"
	"errors"
	"fmt"
	"net/http"
	"os"
	"sort"
	"strings"
	"sync"
)

// Init is the body of the gateway's POST /init, the part of envd's that CubePod uses.
type Init struct {
	AccessToken    *string           `json:"accessToken"`
	EnvVars        map[string]string `json:"envVars"`
	DefaultUser    string            `json:"defaultUser"`
	DefaultWorkdir string            `json:"defaultWorkdir"`
	// CABundle is the sandbox's egress CA (PEM), as envd's caBundle: trusted from now on; ""
	// removes it; absent leaves it as it is.
	CABundle *string `json:"caBundle"`
}

// Session is what /init set: the access token every call must carry, the environment of new
// processes, and the user and directory a request gets when it names none.
type Session struct {
	mu      sync.RWMutex
	token   string
	envs    map[string]string
	user    string
	workdir string
	// ca: an egress CA is installed, and new processes are told where (CAEnv).
	ca bool
	// fixed are podd's own variables, which /init cannot replace.
	fixed map[string]string
}

// NewSession starts as envd does before its first /init: no token, root, no workdir.
func NewSession(fixed map[string]string) *Session {
	return &Session{envs: map[string]string{}, user: "root", fixed: fixed}
}

// Apply takes an /init: a token replaces the old one (an empty one removes it), the variables
// replace the previous set, and a user or workdir, when named, becomes the default.
func (s *Session) Apply(in Init) error {
	if in.DefaultWorkdir != "" && !strings.HasPrefix(in.DefaultWorkdir, "/") {
		return errors.New("defaultWorkdir must be an absolute path")
	}
	if in.DefaultUser != "" {
		if _, err := LookupUser(in.DefaultUser); err != nil {
			return fmt.Errorf("defaultUser '%s' is not an account of this sandbox's image", in.DefaultUser)
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if in.AccessToken != nil {
		s.token = *in.AccessToken
	}
	if in.EnvVars != nil {
		s.envs = map[string]string{}
		for k, v := range in.EnvVars {
			if _, ok := s.fixed[k]; !ok {
				s.envs[k] = v
			}
		}
	}
	if in.DefaultUser != "" {
		s.user = in.DefaultUser
	}
	if in.DefaultWorkdir != "" {
		s.workdir = in.DefaultWorkdir
	}
	return nil
}

// Token is the access token, "" before one was set.
func (s *Session) Token() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.token
}

// Authorized says whether a request carries the access token (always, while there is none).
func (s *Session) Authorized(h http.Header) bool {
	token := s.Token()
	return token == "" || subtle.ConstantTimeCompare([]byte(h.Get("X-Access-Token")), []byte(token)) == 1
}

// Workdir is the default working directory, "" when /init named none.
func (s *Session) Workdir() string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	return s.workdir
}

// User is the user a request runs as: the one it names, else the default.
func (s *Session) User(h http.Header) (*User, error) {
	if name := RequestedUser(h); name != "" {
		return LookupUser(name)
	}
	s.mu.RLock()
	name := s.user
	s.mu.RUnlock()
	u, err := LookupUser(name)
	if err != nil {
		return nil, errors.New("invalid default user: '" + name + "'")
	}
	return u, nil
}

// Env is the environment a new process of the user starts with, before its own variables: the
// container's (the image's and the template's, such as the egress sidecar's HTTP_PROXY, without
// podd's own CUBEPOD_ settings), the user's HOME, USER and LOGNAME, then /init's and podd's.
func (s *Session) Env(u *User) []string {
	var env []string
	for _, kv := range os.Environ() {
		name, _, _ := strings.Cut(kv, "=")
		switch {
		case strings.HasPrefix(name, "CUBEPOD_"), name == "HOME", name == "USER", name == "LOGNAME":
		default:
			env = append(env, kv)
		}
	}
	if os.Getenv("PATH") == "" {
		env = append(env, "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin")
	}
	env = append(env, "HOME="+u.Home, "USER="+u.Name, "LOGNAME="+u.Name)
	s.mu.RLock()
	defer s.mu.RUnlock()
	if s.ca {
		// Before /init's variables, which may name other files.
		env = append(env, Pairs(CAEnv())...)
	}
	return append(env, Pairs(s.envs, s.fixed)...)
}

// SetCA records whether an egress CA is installed.
func (s *Session) SetCA(installed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ca = installed
}

// Envs is every variable /init and podd set, as GET /envs answers them.
func (s *Session) Envs() map[string]string {
	s.mu.RLock()
	defer s.mu.RUnlock()
	out := map[string]string{}
	for _, m := range []map[string]string{s.envs, s.fixed} {
		for k, v := range m {
			out[k] = v
		}
	}
	return out
}

// Pairs are the variables of the maps as NAME=value, each map's sorted by name, in order.
func Pairs(maps ...map[string]string) []string {
	var out []string
	for _, m := range maps {
		keys := make([]string, 0, len(m))
		for k := range m {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		for _, k := range keys {
			out = append(out, k+"="+m[k])
		}
	}
	return out
}
