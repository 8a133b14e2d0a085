// Package filesystem is envd's filesystem.Filesystem service: stat, list, make, move and remove
// paths, and watch directories, as the user a request names (which decides how relative paths
// resolve and who owns what it creates; like envd, the calls themselves run as podd).
package filesystem

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"
	"golang.org/x/sys/unix"
	"google.golang.org/protobuf/types/known/timestamppb"

	"cubepod.local/podd/core"
	spec "cubepod.local/podd/spec/filesystem"
)

// metadataPrefix names the extended attributes that hold a file's E2B metadata.
const metadataPrefix = "user.e2b."

// Entry describes a path as envd 0.6 does: a symlink has its target's type and mode and the
// resolved target. It is not marked `is_symlink`: newer envd does that, and the SDKs then report
// the link's type as a symlink, which E2B's tests for this version do not expect.
func Entry(path string) (*spec.EntryInfo, error) {
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("file not found: %s", path))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error getting file info: %w", err))
	}
	return entryOf(path, info, core.NewNames()), nil
}

func entryOf(path string, info fs.FileInfo, names *core.Names) *spec.EntryInfo {
	e := &spec.EntryInfo{
		Name:        info.Name(),
		Path:        path,
		Size:        info.Size(),
		Permissions: info.Mode().String(),
		Type:        typeOf(info.Mode()),
		Mode:        uint32(info.Mode().Perm()),
	}
	if !info.ModTime().IsZero() {
		e.ModifiedTime = timestamppb.New(info.ModTime())
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok {
		e.Owner, e.Group = names.Owner(st.Uid), names.Group(st.Gid)
	}
	if info.Mode()&fs.ModeSymlink != 0 {
		target, err := filepath.EvalSymlinks(path)
		if err != nil {
			target = path
		}
		e.SymlinkTarget = &target
		e.Type, e.Mode = spec.FileType_FILE_TYPE_UNSPECIFIED, 0
		if t, err := os.Stat(path); err == nil {
			e.Type, e.Mode = typeOf(t.Mode()), uint32(t.Mode().Perm())
		}
	}
	if m := metadata(path); len(m) > 0 {
		e.Metadata = m
	}
	return e
}

func typeOf(m fs.FileMode) spec.FileType {
	switch {
	case m.IsRegular():
		return spec.FileType_FILE_TYPE_FILE
	case m.IsDir():
		return spec.FileType_FILE_TYPE_DIRECTORY
	}
	return spec.FileType_FILE_TYPE_UNSPECIFIED
}

// metadata reads a path's E2B metadata; a filesystem without extended attributes has none.
func metadata(path string) map[string]string {
	size, err := unix.Llistxattr(path, nil)
	if err != nil || size == 0 {
		return nil
	}
	buf := make([]byte, size)
	if size, err = unix.Llistxattr(path, buf); err != nil {
		return nil
	}
	out := map[string]string{}
	for _, name := range strings.Split(string(buf[:size]), "\x00") {
		key, ok := strings.CutPrefix(name, metadataPrefix)
		if !ok || key == "" {
			continue
		}
		value := make([]byte, 4096)
		if n, err := unix.Lgetxattr(path, name, value); err == nil {
			out[key] = string(value[:n])
		}
	}
	return out
}
