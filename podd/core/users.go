// Package core is what podd's services share: the sandbox's users, how a request names one, how
// paths resolve against a user's home, and the session the gateway's /init sets up.
package core

import (
	"encoding/base64"
	"fmt"
	"net/http"
	"os/user"
	"strconv"
	"strings"
)

// User is an account of the sandbox's own /etc/passwd, as processes and new files get it.
type User struct {
	Name   string
	Home   string
	UID    uint32
	GID    uint32
	Groups []uint32
}

// LookupUser finds an account by name in the sandbox's /etc/passwd and /etc/group.
func LookupUser(name string) (*User, error) {
	u, err := user.Lookup(name)
	if err != nil {
		return nil, fmt.Errorf("invalid username: '%s'", name)
	}
	uid, err1 := strconv.ParseUint(u.Uid, 10, 32)
	gid, err2 := strconv.ParseUint(u.Gid, 10, 32)
	if err1 != nil || err2 != nil {
		return nil, fmt.Errorf("user '%s' has no numeric uid and gid", name)
	}
	out := &User{Name: name, Home: u.HomeDir, UID: uint32(uid), GID: uint32(gid)}
	if ids, err := u.GroupIds(); err == nil {
		for _, id := range ids {
			if g, err := strconv.ParseUint(id, 10, 32); err == nil {
				out.Groups = append(out.Groups, uint32(g))
			}
		}
	}
	return out, nil
}

// RequestedUser is the user a request names as E2B's SDKs do (`Authorization: Basic
// base64(user:)`), or "" when it names none.
func RequestedUser(h http.Header) string {
	auth := h.Get("Authorization")
	scheme, encoded, ok := strings.Cut(auth, " ")
	if !ok || !strings.EqualFold(scheme, "Basic") {
		return ""
	}
	raw, err := base64.StdEncoding.DecodeString(strings.TrimSpace(encoded))
	if err != nil {
		return ""
	}
	name, _, _ := strings.Cut(string(raw), ":")
	return name
}

// Names finds the account and group names of ids, each looked up once: a listing of many
// entries would otherwise read /etc/passwd once per entry.
type Names struct {
	owners map[uint32]string
	groups map[uint32]string
}

// NewNames is an empty set of names, for one call.
func NewNames() *Names { return &Names{owners: map[uint32]string{}, groups: map[uint32]string{}} }

// Owner is the account name of a uid, or the number when /etc/passwd has none.
func (n *Names) Owner(uid uint32) string {
	return n.find(n.owners, uid, func(id string) (string, error) {
		u, err := user.LookupId(id)
		if err != nil {
			return "", err
		}
		return u.Username, nil
	})
}

// Group is the group name of a gid, or the number when /etc/group has none.
func (n *Names) Group(gid uint32) string {
	return n.find(n.groups, gid, func(id string) (string, error) {
		g, err := user.LookupGroupId(id)
		if err != nil {
			return "", err
		}
		return g.Name, nil
	})
}

func (n *Names) find(known map[uint32]string, id uint32, lookup func(string) (string, error)) string {
	if name, ok := known[id]; ok {
		return name
	}
	name := strconv.FormatUint(uint64(id), 10)
	if found, err := lookup(name); err == nil {
		name = found
	}
	known[id] = name
	return name
}
