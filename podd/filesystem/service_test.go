package filesystem

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"testing"
	"time"

	"connectrpc.com/connect"

	"cubepod.local/podd/core"
	spec "cubepod.local/podd/spec/filesystem"
	"cubepod.local/podd/spec/filesystem/filesystemconnect"
)

// client talks to the service as E2B's SDKs do: Connect with JSON over HTTP/1.1.
func client(t *testing.T, opts ...connect.ClientOption) filesystemconnect.FilesystemClient {
	t.Helper()
	mux := http.NewServeMux()
	mux.Handle(filesystemconnect.NewFilesystemHandler(New(core.NewSession(nil))))
	srv := httptest.NewServer(mux)
	t.Cleanup(srv.Close)
	if len(opts) == 0 {
		opts = []connect.ClientOption{connect.WithProtoJSON()}
	}
	return filesystemconnect.NewFilesystemClient(srv.Client(), srv.URL, opts...)
}

func code(err error) connect.Code {
	var ce *connect.Error
	if errors.As(err, &ce) {
		return ce.Code()
	}
	return 0
}

func tree(t *testing.T) string {
	t.Helper()
	root := t.TempDir()
	for _, p := range []string{"a/b/c", "d"} {
		if err := os.MkdirAll(filepath.Join(root, p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{"f.txt", "a/g.txt", "a/b/h.txt", "a/b/c/i.txt"} {
		if err := os.WriteFile(filepath.Join(root, p), []byte("hello"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(filepath.Join(root, "f.txt"), filepath.Join(root, "link")); err != nil {
		t.Fatal(err)
	}
	return root
}

func TestStat(t *testing.T) {
	c, root := client(t), tree(t)
	ctx := context.Background()
	res, err := c.Stat(ctx, connect.NewRequest(&spec.StatRequest{Path: filepath.Join(root, "f.txt")}))
	if err != nil {
		t.Fatal(err)
	}
	e := res.Msg.Entry
	if e.Name != "f.txt" || e.Type != spec.FileType_FILE_TYPE_FILE || e.Size != 5 || e.Mode != 0o644 ||
		e.Permissions != "-rw-r--r--" || e.Owner == "" || e.ModifiedTime == nil {
		t.Fatalf("entry %v", e)
	}
	link, err := c.Stat(ctx, connect.NewRequest(&spec.StatRequest{Path: filepath.Join(root, "link")}))
	if err != nil {
		t.Fatal(err)
	}
	if l := link.Msg.Entry; l.IsSymlink || l.Type != spec.FileType_FILE_TYPE_FILE || l.GetSymlinkTarget() != filepath.Join(root, "f.txt") {
		t.Fatalf("symlink entry %v", l)
	}
	_, err = c.Stat(ctx, connect.NewRequest(&spec.StatRequest{Path: filepath.Join(root, "none")}))
	if code(err) != connect.CodeNotFound {
		t.Fatalf("missing path: %v", err)
	}
	_, err = c.Stat(ctx, connect.NewRequest(&spec.StatRequest{Path: "~nobody/x"}))
	if code(err) != connect.CodeInvalidArgument {
		t.Fatalf("another user's home: %v", err)
	}
}

func TestStatResolvesRelativePathsAgainstTheHome(t *testing.T) {
	c := client(t)
	home, _ := core.LookupUser("root")
	res, err := c.Stat(context.Background(), connect.NewRequest(&spec.StatRequest{Path: "."}))
	if err != nil {
		t.Fatal(err)
	}
	if res.Msg.Entry.Path != home.Home {
		t.Fatalf("path %s, want %s", res.Msg.Entry.Path, home.Home)
	}
}

func TestListDirDepth(t *testing.T) {
	c, root := client(t), tree(t)
	names := func(depth uint32) []string {
		res, err := c.ListDir(context.Background(), connect.NewRequest(&spec.ListDirRequest{Path: root, Depth: depth}))
		if err != nil {
			t.Fatal(err)
		}
		var out []string
		for _, e := range res.Msg.Entries {
			rel, _ := filepath.Rel(root, e.Path)
			out = append(out, rel)
		}
		return out
	}
	want := map[uint32][]string{
		0: {"a", "d", "f.txt", "link"},
		1: {"a", "d", "f.txt", "link"},
		2: {"a", "a/b", "a/g.txt", "d", "f.txt", "link"},
		9: {"a", "a/b", "a/b/c", "a/b/c/i.txt", "a/b/h.txt", "a/g.txt", "d", "f.txt", "link"},
	}
	for depth, w := range want {
		got := names(depth)
		if !sort.StringsAreSorted(got) || len(got) != len(w) {
			t.Fatalf("depth %d: %v, want %v", depth, got, w)
		}
		for i := range w {
			if got[i] != w[i] {
				t.Fatalf("depth %d: %v, want %v", depth, got, w)
			}
		}
	}
	_, err := c.ListDir(context.Background(), connect.NewRequest(&spec.ListDirRequest{Path: filepath.Join(root, "f.txt")}))
	if code(err) != connect.CodeInvalidArgument {
		t.Fatalf("a file: %v", err)
	}
	_, err = c.ListDir(context.Background(), connect.NewRequest(&spec.ListDirRequest{Path: filepath.Join(root, "none")}))
	if code(err) != connect.CodeNotFound {
		t.Fatalf("missing: %v", err)
	}
}

func TestListDirOfManyEntriesInBinaryProto(t *testing.T) {
	root := t.TempDir()
	for i := 0; i < 2000; i++ {
		if err := os.WriteFile(filepath.Join(root, "f"+time.Duration(i).String()), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	c := client(t, connect.WithClientOptions()) // the default: binary protobuf
	res, err := c.ListDir(context.Background(), connect.NewRequest(&spec.ListDirRequest{Path: root}))
	if err != nil {
		t.Fatal(err)
	}
	if len(res.Msg.Entries) != 2000 {
		t.Fatalf("%d entries", len(res.Msg.Entries))
	}
}

func TestMakeDirMoveRemove(t *testing.T) {
	c, root := client(t), tree(t)
	ctx := context.Background()
	dir := filepath.Join(root, "x/y/z")
	res, err := c.MakeDir(ctx, connect.NewRequest(&spec.MakeDirRequest{Path: dir}))
	if err != nil || res.Msg.Entry.Type != spec.FileType_FILE_TYPE_DIRECTORY {
		t.Fatalf("make: %v %v", res, err)
	}
	_, err = c.MakeDir(ctx, connect.NewRequest(&spec.MakeDirRequest{Path: dir}))
	if code(err) != connect.CodeAlreadyExists {
		t.Fatalf("again: %v", err)
	}
	_, err = c.MakeDir(ctx, connect.NewRequest(&spec.MakeDirRequest{Path: filepath.Join(root, "f.txt")}))
	if code(err) != connect.CodeInvalidArgument {
		t.Fatalf("over a file: %v", err)
	}
	_, err = c.MakeDir(ctx, connect.NewRequest(&spec.MakeDirRequest{Path: filepath.Join(root, "f.txt", "sub")}))
	if code(err) != connect.CodeInternal {
		t.Fatalf("under a file: %v", err)
	}

	moved, err := c.Move(ctx, connect.NewRequest(&spec.MoveRequest{Source: filepath.Join(root, "f.txt"), Destination: filepath.Join(root, "new/dir/g.txt")}))
	if err != nil || moved.Msg.Entry.Name != "g.txt" {
		t.Fatalf("move: %v %v", moved, err)
	}
	_, err = c.Move(ctx, connect.NewRequest(&spec.MoveRequest{Source: filepath.Join(root, "f.txt"), Destination: filepath.Join(root, "h.txt")}))
	if code(err) != connect.CodeNotFound {
		t.Fatalf("move of a missing file: %v", err)
	}

	for _, p := range []string{filepath.Join(root, "a"), filepath.Join(root, "never")} {
		if _, err := c.Remove(ctx, connect.NewRequest(&spec.RemoveRequest{Path: p})); err != nil {
			t.Fatalf("remove %s: %v", p, err)
		}
	}
	if _, err := os.Stat(filepath.Join(root, "a")); !os.IsNotExist(err) {
		t.Fatalf("a still there: %v", err)
	}
	_, err = c.Remove(ctx, connect.NewRequest(&spec.RemoveRequest{Path: "/"}))
	if code(err) != connect.CodeInvalidArgument {
		t.Fatalf("remove /: %v", err)
	}
}

func TestUnknownUser(t *testing.T) {
	c, root := client(t), tree(t)
	req := connect.NewRequest(&spec.StatRequest{Path: root})
	req.Header().Set("Authorization", "Basic bm9ib2R5LWF0LWFsbDo=") // "nobody-at-all:"
	_, err := c.Stat(context.Background(), req)
	if code(err) != connect.CodeUnauthenticated {
		t.Fatalf("unknown user: %v", err)
	}
}

func TestWatchDir(t *testing.T) {
	c, root := client(t), tree(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	stream, err := c.WatchDir(ctx, connect.NewRequest(&spec.WatchDirRequest{Path: root, Recursive: true, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	if !stream.Receive() || stream.Msg().GetStart() == nil {
		t.Fatalf("first message %v: %v", stream.Msg(), stream.Err())
	}
	if err := os.WriteFile(filepath.Join(root, "a/b/new.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	for stream.Receive() {
		e := stream.Msg().GetFilesystem()
		if e != nil && e.Name == "a/b/new.txt" && e.Type == spec.EventType_EVENT_TYPE_CREATE {
			if e.Entry == nil || e.Entry.Name != "new.txt" {
				t.Fatalf("create without its entry: %v", e)
			}
			return
		}
	}
	t.Fatalf("no create event: %v", stream.Err())
}

func TestWatchDirRefusals(t *testing.T) {
	c, root := client(t), tree(t)
	for path, want := range map[string]connect.Code{
		filepath.Join(root, "none"):  connect.CodeNotFound,
		filepath.Join(root, "f.txt"): connect.CodeInvalidArgument,
	} {
		stream, err := c.WatchDir(context.Background(), connect.NewRequest(&spec.WatchDirRequest{Path: path}))
		if err == nil {
			for stream.Receive() {
			}
			err = stream.Err()
		}
		if code(err) != want {
			t.Fatalf("%s: %v, want %v", path, err, want)
		}
	}
}

func TestPolledWatcher(t *testing.T) {
	c, root := client(t), tree(t)
	ctx := context.Background()
	created, err := c.CreateWatcher(ctx, connect.NewRequest(&spec.CreateWatcherRequest{Path: root}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.WatcherId
	if len(id) != 21 || id[0] != 'w' {
		t.Fatalf("watcher id %q", id)
	}
	if err := os.WriteFile(filepath.Join(root, "polled.txt"), []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(5 * time.Second)
	for {
		res, err := c.GetWatcherEvents(ctx, connect.NewRequest(&spec.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		if len(res.Msg.Events) > 0 && res.Msg.Events[0].Name == "polled.txt" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("no event")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if _, err := c.RemoveWatcher(ctx, connect.NewRequest(&spec.RemoveWatcherRequest{WatcherId: id})); err != nil {
		t.Fatal(err)
	}
	_, err = c.GetWatcherEvents(ctx, connect.NewRequest(&spec.GetWatcherEventsRequest{WatcherId: id}))
	if code(err) != connect.CodeNotFound {
		t.Fatalf("removed watcher: %v", err)
	}
}

func TestPollRightAfterAChangeHasItsEvent(t *testing.T) {
	c, root := client(t), tree(t)
	ctx := context.Background()
	created, err := c.CreateWatcher(ctx, connect.NewRequest(&spec.CreateWatcherRequest{Path: root, IncludeEntry: true}))
	if err != nil {
		t.Fatal(err)
	}
	id := created.Msg.WatcherId
	poll := func() []*spec.FilesystemEvent {
		t.Helper()
		res, err := c.GetWatcherEvents(ctx, connect.NewRequest(&spec.GetWatcherEventsRequest{WatcherId: id}))
		if err != nil {
			t.Fatal(err)
		}
		return res.Msg.Events
	}
	if events := poll(); len(events) != 0 {
		t.Fatalf("before any change: %v", events)
	}
	for i := range 3 {
		name := fmt.Sprintf("now-%d.txt", i)
		if err := os.WriteFile(filepath.Join(root, name), []byte("x"), 0o644); err != nil {
			t.Fatal(err)
		}
		events := poll()
		if !slices.ContainsFunc(events, func(e *spec.FilesystemEvent) bool { return e.Name == name }) {
			t.Fatalf("a poll right after writing %s: %v", name, events)
		}
	}
}
