package filesystem

import (
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"

	"connectrpc.com/connect"

	"cubepod.local/podd/core"
	spec "cubepod.local/podd/spec/filesystem"
)

// Service implements filesystem.Filesystem.
type Service struct {
	session  *core.Session
	watchers *watchers
}

// New is the service for a session.
func New(session *core.Session) *Service {
	return &Service{session: session, watchers: newWatchers()}
}

// target is the request's user and the path made absolute for that user.
func (s *Service) target(req connect.AnyRequest, path string) (*core.User, string, error) {
	u, err := s.session.User(req.Header())
	if err != nil {
		return nil, "", connect.NewError(connect.CodeUnauthenticated, err)
	}
	resolved, err := core.Resolve(path, u, s.session.Workdir())
	if err != nil {
		return nil, "", connect.NewError(connect.CodeInvalidArgument, err)
	}
	return u, resolved, nil
}

func (s *Service) Stat(_ context.Context, req *connect.Request[spec.StatRequest]) (*connect.Response[spec.StatResponse], error) {
	_, path, err := s.target(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	e, err := Entry(path)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&spec.StatResponse{Entry: e}), nil
}

func (s *Service) MakeDir(_ context.Context, req *connect.Request[spec.MakeDirRequest]) (*connect.Response[spec.MakeDirResponse], error) {
	u, path, err := s.target(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(path)
	switch {
	case err == nil && info.IsDir():
		return nil, connect.NewError(connect.CodeAlreadyExists, fmt.Errorf("directory already exists: %s", path))
	case err == nil:
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path already exists but it is not a directory: %s", path))
	case !errors.Is(err, fs.ErrNotExist):
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error getting file info: %w", err))
	}
	if err := core.EnsureDirs(path, u); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating directory: %w", err))
	}
	e, err := Entry(path)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&spec.MakeDirResponse{Entry: e}), nil
}

func (s *Service) Move(_ context.Context, req *connect.Request[spec.MoveRequest]) (*connect.Response[spec.MoveResponse], error) {
	u, source, err := s.target(req, req.Msg.GetSource())
	if err != nil {
		return nil, err
	}
	_, destination, err := s.target(req, req.Msg.GetDestination())
	if err != nil {
		return nil, err
	}
	if _, err := os.Lstat(source); errors.Is(err, fs.ErrNotExist) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("source file not found: %s", source))
	}
	if err := core.EnsureDirs(filepath.Dir(destination), u); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating destination directory: %w", err))
	}
	if err := os.Rename(source, destination); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error renaming: %w", err))
	}
	e, err := Entry(destination)
	if err != nil {
		return nil, err
	}
	return connect.NewResponse(&spec.MoveResponse{Entry: e}), nil
}

func (s *Service) ListDir(_ context.Context, req *connect.Request[spec.ListDirRequest]) (*connect.Response[spec.ListDirResponse], error) {
	_, path, err := s.target(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	depth := int(req.Msg.GetDepth())
	if depth == 0 {
		depth = 1
	}
	root, err := filepath.EvalSymlinks(path)
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path not found: %s", path))
	case errors.Is(err, syscall.ELOOP):
		return nil, connect.NewError(connect.CodeFailedPrecondition, fmt.Errorf("path has too many levels of symlinks: %s", path))
	case err != nil:
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error resolving path: %w", err))
	}
	info, err := os.Stat(root)
	if err != nil {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path not found: %s", path))
	}
	if !info.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path is not a directory: %s", path))
	}
	var entries []*spec.EntryInfo
	names := core.NewNames()
	err = filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			if errors.Is(err, fs.ErrNotExist) {
				return nil
			}
			return err
		}
		if p == root {
			return nil
		}
		rel, _ := filepath.Rel(root, p)
		level := strings.Count(rel, string(filepath.Separator)) + 1
		if level > depth {
			if d.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		info, err := os.Lstat(p)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		if err != nil {
			return err
		}
		entries = append(entries, entryOf(filepath.Join(path, rel), info, names))
		if d.IsDir() && level == depth {
			return filepath.SkipDir
		}
		return nil
	})
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error reading directory %s: %w", path, err))
	}
	return connect.NewResponse(&spec.ListDirResponse{Entries: entries}), nil
}

func (s *Service) Remove(_ context.Context, req *connect.Request[spec.RemoveRequest]) (*connect.Response[spec.RemoveResponse], error) {
	_, path, err := s.target(req, req.Msg.GetPath())
	if err != nil {
		return nil, err
	}
	if filepath.Clean(path) == "/" {
		return nil, connect.NewError(connect.CodeInvalidArgument, errors.New("refusing to remove /"))
	}
	if err := os.RemoveAll(path); err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error removing: %w", err))
	}
	return connect.NewResponse(&spec.RemoveResponse{}), nil
}
