package filesystem

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"time"

	"connectrpc.com/connect"
	"github.com/fsnotify/fsnotify"
	"golang.org/x/sys/unix"

	"cubepod.local/podd/core"
	spec "cubepod.local/podd/spec/filesystem"
)

// networkFilesystems are the statfs magics of mounts whose changes inotify cannot see.
var networkFilesystems = map[int64]string{0x6969: "nfs", 0xFF534D42: "cifs", 0x517B: "smb", 0xFE534D42: "smb2", 0x65735546: "fuse"}

// watch follows a directory (and, when recursive, every directory under it, new ones included)
// and hands each change to emit, one event per kind of change, as envd reports them.
type watch struct {
	root      string
	entries   bool
	recursive bool
	w         *fsnotify.Watcher
}

func (s *Service) openWatch(req connect.AnyRequest, path string, recursive, entries, network bool) (*watch, error) {
	_, dir, err := s.target(req, path)
	if err != nil {
		return nil, err
	}
	info, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("path %s not found", dir))
	}
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error statting path %s: %w", dir, err))
	}
	if !info.IsDir() {
		return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("path %s not a directory", dir))
	}
	if !network {
		if kind := networkMount(dir); kind != "" {
			return nil, connect.NewError(connect.CodeInvalidArgument, fmt.Errorf("cannot watch path on network filesystem (%s): %s", kind, dir))
		}
	}
	w, err := fsnotify.NewWatcher()
	if err != nil {
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error creating watcher: %w", err))
	}
	out := &watch{root: dir, entries: entries, recursive: recursive, w: w}
	add := func(p string) error { return w.Add(p) }
	if recursive {
		err = filepath.WalkDir(dir, func(p string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				err = add(p)
			}
			return err
		})
	} else {
		err = add(dir)
	}
	if err != nil {
		_ = w.Close()
		return nil, connect.NewError(connect.CodeInternal, fmt.Errorf("error watching %s: %w", dir, err))
	}
	return out, nil
}

func networkMount(dir string) string {
	var st unix.Statfs_t
	if unix.Statfs(dir, &st) != nil {
		return ""
	}
	return networkFilesystems[int64(st.Type)]
}

// run passes changes to emit until ctx ends or the watcher fails.
func (w *watch) run(ctx context.Context, emit func(*spec.FilesystemEvent) error) error {
	defer w.w.Close()
	for {
		select {
		case <-ctx.Done():
			return nil
		case err, ok := <-w.w.Errors:
			if !ok {
				return nil
			}
			return connect.NewError(connect.CodeInternal, fmt.Errorf("watcher error: %w", err))
		case ev, ok := <-w.w.Events:
			if !ok {
				return nil
			}
			if w.recursive && ev.Has(fsnotify.Create) {
				if info, err := os.Lstat(ev.Name); err == nil && info.IsDir() {
					_ = w.w.Add(ev.Name)
				}
			}
			for _, e := range w.events(ev) {
				if err := emit(e); err != nil {
					return err
				}
			}
		}
	}
}

// opOrder is the order envd reports the kinds of one change in.
var opOrder = []struct {
	op   fsnotify.Op
	kind spec.EventType
}{
	{fsnotify.Create, spec.EventType_EVENT_TYPE_CREATE},
	{fsnotify.Rename, spec.EventType_EVENT_TYPE_RENAME},
	{fsnotify.Chmod, spec.EventType_EVENT_TYPE_CHMOD},
	{fsnotify.Write, spec.EventType_EVENT_TYPE_WRITE},
	{fsnotify.Remove, spec.EventType_EVENT_TYPE_REMOVE},
}

func (w *watch) events(ev fsnotify.Event) []*spec.FilesystemEvent {
	name, err := filepath.Rel(w.root, ev.Name)
	if err != nil {
		name = ev.Name
	}
	var out []*spec.FilesystemEvent
	for _, o := range opOrder {
		if !ev.Has(o.op) {
			continue
		}
		e := &spec.FilesystemEvent{Name: name, Type: o.kind}
		if w.entries && o.op&(fsnotify.Create|fsnotify.Write|fsnotify.Chmod) != 0 {
			if info, err := os.Lstat(ev.Name); err == nil {
				e.Entry = entryOf(ev.Name, info, core.NewNames())
			}
		}
		out = append(out, e)
	}
	return out
}

func (s *Service) WatchDir(ctx context.Context, req *connect.Request[spec.WatchDirRequest], stream *connect.ServerStream[spec.WatchDirResponse]) error {
	m := req.Msg
	w, err := s.openWatch(req, m.GetPath(), m.GetRecursive(), m.GetIncludeEntry(), m.GetAllowNetworkMounts())
	if err != nil {
		return err
	}
	send := core.Serialized(stream.Send)
	if err := send(&spec.WatchDirResponse{Event: &spec.WatchDirResponse_Start{Start: &spec.WatchDirResponse_StartEvent{}}}); err != nil {
		return err
	}
	keepalive := core.StartKeepalive(ctx, req.Header(), func() error {
		return send(&spec.WatchDirResponse{Event: &spec.WatchDirResponse_Keepalive{Keepalive: &spec.WatchDirResponse_KeepAlive{}}})
	})
	defer keepalive.Stop()
	return w.run(ctx, func(e *spec.FilesystemEvent) error {
		keepalive.Reset()
		return send(&spec.WatchDirResponse{Event: &spec.WatchDirResponse_Filesystem{Filesystem: e}})
	})
}

// watchers are the polled watches of CreateWatcher, which live until RemoveWatcher.
type watchers struct {
	mu   sync.Mutex
	byID map[string]*polled
}

type polled struct {
	cancel context.CancelFunc
	mu     sync.Mutex
	events []*spec.FilesystemEvent
	err    error
	// arrived has a value once an event was kept since the last poll.
	arrived chan struct{}
}

// maxPolledEvents bounds what a watcher nobody polls keeps; older events are dropped.
const maxPolledEvents = 10000

// pollGrace is how long a poll waits for an event to arrive: the kernel queues a change's
// event as the change is made, and the watch takes it (and, asked to, its entry's details) a
// moment later, longer on a kernel of the sandbox's own (gVisor), so that a poll right after a
// change would otherwise miss it.
const pollGrace = 50 * time.Millisecond

func newWatchers() *watchers { return &watchers{byID: map[string]*polled{}} }

func (s *Service) CreateWatcher(_ context.Context, req *connect.Request[spec.CreateWatcherRequest]) (*connect.Response[spec.CreateWatcherResponse], error) {
	m := req.Msg
	w, err := s.openWatch(req, m.GetPath(), m.GetRecursive(), m.GetIncludeEntry(), m.GetAllowNetworkMounts())
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithCancel(context.Background())
	p := &polled{cancel: cancel, arrived: make(chan struct{}, 1)}
	id := watcherID()
	s.watchers.mu.Lock()
	s.watchers.byID[id] = p
	s.watchers.mu.Unlock()
	go func() {
		err := w.run(ctx, func(e *spec.FilesystemEvent) error {
			p.mu.Lock()
			defer p.mu.Unlock()
			if len(p.events) >= maxPolledEvents {
				p.events = p.events[1:]
			}
			p.events = append(p.events, e)
			select {
			case p.arrived <- struct{}{}:
			default:
			}
			return nil
		})
		p.mu.Lock()
		p.err = err
		p.mu.Unlock()
	}()
	return connect.NewResponse(&spec.CreateWatcherResponse{WatcherId: id}), nil
}

func (s *Service) watcher(id string) (*polled, error) {
	s.watchers.mu.Lock()
	defer s.watchers.mu.Unlock()
	p, ok := s.watchers.byID[id]
	if !ok {
		return nil, connect.NewError(connect.CodeNotFound, fmt.Errorf("watcher with id %s not found", id))
	}
	return p, nil
}

func (s *Service) GetWatcherEvents(ctx context.Context, req *connect.Request[spec.GetWatcherEventsRequest]) (*connect.Response[spec.GetWatcherEventsResponse], error) {
	p, err := s.watcher(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	p.mu.Lock()
	failed := p.err != nil
	p.mu.Unlock()
	if !failed {
		// Events already taken say nothing of a change made just before this poll (a file's
		// write event can trail its create until after the poll that took the create): wait for
		// one that arrives now.
		select {
		case <-p.arrived:
		default:
		}
		select {
		case <-p.arrived:
		case <-time.After(pollGrace):
		case <-ctx.Done():
		}
	}
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err != nil {
		return nil, p.err
	}
	events := p.events
	p.events = nil
	// The signal of events taken now is not one for the next poll.
	select {
	case <-p.arrived:
	default:
	}
	return connect.NewResponse(&spec.GetWatcherEventsResponse{Events: events}), nil
}

func (s *Service) RemoveWatcher(_ context.Context, req *connect.Request[spec.RemoveWatcherRequest]) (*connect.Response[spec.RemoveWatcherResponse], error) {
	p, err := s.watcher(req.Msg.GetWatcherId())
	if err != nil {
		return nil, err
	}
	p.cancel()
	s.watchers.mu.Lock()
	delete(s.watchers.byID, req.Msg.GetWatcherId())
	s.watchers.mu.Unlock()
	return connect.NewResponse(&spec.RemoveWatcherResponse{}), nil
}

// watcherID is "w" and 20 random lowercase letters and digits, as envd's.
func watcherID() string {
	const alphabet = "abcdefghijklmnopqrstuvwxyz0123456789"
	b := make([]byte, 20)
	_, _ = rand.Read(b)
	for i := range b {
		b[i] = alphabet[int(b[i])%len(alphabet)]
	}
	return "w" + string(b)
}
