package core

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// ErrOtherHome is a path starting with another user's home (`~name`), which envd refuses too.
var ErrOtherHome = errors.New("cannot expand user-specific home dir")

// Resolve makes a path of a request absolute as envd does: "" is the default workdir (else
// the home), `~` and `~/x` are under the user's home, and a relative path is relative to the
// home, not to the workdir.
func Resolve(path string, u *User, workdir string) (string, error) {
	if path == "" {
		path = workdir
	}
	if path == "~" || strings.HasPrefix(path, "~/") {
		return filepath.Join(u.Home, path[1:]), nil
	}
	if strings.HasPrefix(path, "~") {
		return "", fmt.Errorf("%w: %s", ErrOtherHome, path)
	}
	if filepath.IsAbs(path) {
		return path, nil
	}
	return filepath.Join(u.Home, path), nil
}

// EnsureDirs makes every missing directory of an absolute path, owned by the user (mkdir -p,
// as envd makes them for uploads and MakeDir).
func EnsureDirs(dir string, u *User) error {
	dir = filepath.Clean(dir)
	if dir == "/" {
		return nil
	}
	info, err := os.Stat(dir)
	if err == nil {
		if !info.IsDir() {
			return fmt.Errorf("path is a file: %s", dir)
		}
		return nil
	}
	if !errors.Is(err, os.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
		return err
	}
	if err := EnsureDirs(filepath.Dir(dir), u); err != nil {
		return err
	}
	if err := os.Mkdir(dir, 0o755); err != nil && !errors.Is(err, os.ErrExist) {
		return err
	}
	return os.Lchown(dir, int(u.UID), int(u.GID))
}

// Workspace is where the sandbox's workspace volume is mounted.
const Workspace = "/workspace"

// GiveWorkspace hands a workspace that root still owns (a new volume's) to the default user, so
// that the sandbox's commands, which run as that user, may write there; one already given, or
// taken by someone, is left as it is.
func GiveWorkspace(dir string, u *User) error {
	if u.UID == 0 {
		return nil
	}
	info, err := os.Stat(dir)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return err
	}
	if st, ok := info.Sys().(*syscall.Stat_t); ok && st.Uid == 0 && info.IsDir() {
		return os.Lchown(dir, int(u.UID), int(u.GID))
	}
	return nil
}
