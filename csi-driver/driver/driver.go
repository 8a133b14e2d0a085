// Package driver serves the CSI Identity, Controller and Node services for one node's pool of
// image files (package pool), reached through loop devices (package loop). The controller and
// the node run in one process: a volume lives on the node whose pool holds it.
package driver

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"strings"
	"sync"

	"github.com/container-storage-interface/spec/lib/go/csi"
	"google.golang.org/grpc"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"
	"k8s.io/mount-utils"
	utilexec "k8s.io/utils/exec"

	"cubepod.local/csi-driver/pool"
)

// Config is what the driver is given at start.
type Config struct {
	// Name is the driver's name, the provisioner of its StorageClasses.
	Name string
	// Version is reported by GetPluginInfo.
	Version string
	// NodeID is the node's name, as the kubelet knows it.
	NodeID string
	// Pool is the directory of volumes and snapshots, on a filesystem that clones files.
	Pool string
}

// Driver is the CSI plugin.
type Driver struct {
	csi.UnimplementedIdentityServer
	csi.UnimplementedControllerServer
	csi.UnimplementedNodeServer

	config  Config
	pool    *pool.Pool
	mounter *mount.SafeFormatAndMount
	// locks serialises the node's calls on one volume (stage, publish, expand, a clone's freeze).
	locks keyedMutex
	log   *slog.Logger
}

// New opens the pool and thaws any filesystem of its volumes a stopped driver left frozen.
func New(config Config, log *slog.Logger) (*Driver, error) {
	if config.Name == "" || config.NodeID == "" {
		return nil, errors.New("the driver needs a name and a node ID")
	}
	p, err := pool.Open(config.Pool)
	if err != nil {
		return nil, err
	}
	d := &Driver{
		config:  config,
		pool:    p,
		mounter: &mount.SafeFormatAndMount{Interface: mount.New(""), Exec: utilexec.New()},
		log:     log,
	}
	d.thawAll()
	return d, nil
}

// Serve answers CSI calls on the Unix socket until the context ends.
func (d *Driver) Serve(ctx context.Context, socket string) error {
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	server := grpc.NewServer(grpc.UnaryInterceptor(d.logged))
	csi.RegisterIdentityServer(server, d)
	csi.RegisterControllerServer(server, d)
	csi.RegisterNodeServer(server, d)
	go func() {
		<-ctx.Done()
		server.GracefulStop()
	}()
	d.log.Info("serving CSI", "driver", d.config.Name, "node", d.config.NodeID, "socket", socket, "pool", d.config.Pool)
	return server.Serve(l)
}

// logged logs every call that changes something, and every failure.
func (d *Driver) logged(ctx context.Context, req any, info *grpc.UnaryServerInfo, handler grpc.UnaryHandler) (any, error) {
	method := info.FullMethod[strings.LastIndex(info.FullMethod, "/")+1:]
	resp, err := handler(ctx, req)
	switch {
	case err != nil:
		d.log.Warn("call failed", "method", method, "error", err)
	case !strings.HasPrefix(method, "Get") && !strings.HasPrefix(method, "List") &&
		!strings.HasSuffix(method, "GetCapabilities") && method != "Probe" &&
		method != "NodeGetVolumeStats" && method != "NodeGetInfo":
		d.log.Info("call", "method", method)
	}
	return resp, err
}

// GetPluginInfo names the driver.
func (d *Driver) GetPluginInfo(context.Context, *csi.GetPluginInfoRequest) (*csi.GetPluginInfoResponse, error) {
	return &csi.GetPluginInfoResponse{Name: d.config.Name, VendorVersion: d.config.Version}, nil
}

// GetPluginCapabilities says the driver has a controller service.
func (d *Driver) GetPluginCapabilities(context.Context, *csi.GetPluginCapabilitiesRequest) (*csi.GetPluginCapabilitiesResponse, error) {
	return &csi.GetPluginCapabilitiesResponse{Capabilities: []*csi.PluginCapability{{
		Type: &csi.PluginCapability_Service_{Service: &csi.PluginCapability_Service{
			Type: csi.PluginCapability_Service_CONTROLLER_SERVICE,
		}},
	}}}, nil
}

// Probe answers ready once the pool is open, which New ensured.
func (d *Driver) Probe(context.Context, *csi.ProbeRequest) (*csi.ProbeResponse, error) {
	return &csi.ProbeResponse{}, nil
}

// codeOf maps the pool's errors to CSI's codes.
func codeOf(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, pool.ErrNotFound):
		return status.Error(codes.NotFound, err.Error())
	case errors.Is(err, pool.ErrConflict):
		return status.Error(codes.AlreadyExists, err.Error())
	default:
		return status.Error(codes.Internal, err.Error())
	}
}

func invalid(format string, args ...any) error {
	return status.Errorf(codes.InvalidArgument, format, args...)
}

// required refuses a request that lacks a field: its arguments are pairs of a value and what it is.
func required(fields ...string) error {
	for i := 0; i+1 < len(fields); i += 2 {
		if fields[i] == "" {
			return invalid("%s is required", fields[i+1])
		}
	}
	return nil
}

// keyedMutex is one mutex per key, made on first use and dropped when unused.
type keyedMutex struct {
	mu    sync.Mutex
	locks map[string]*keyedLock
}

type keyedLock struct {
	sync.Mutex
	users int
}

func (k *keyedMutex) lock(key string) func() {
	k.mu.Lock()
	if k.locks == nil {
		k.locks = map[string]*keyedLock{}
	}
	l := k.locks[key]
	if l == nil {
		l = &keyedLock{}
		k.locks[key] = l
	}
	l.users++
	k.mu.Unlock()
	l.Lock()
	return func() {
		l.Unlock()
		k.mu.Lock()
		if l.users--; l.users == 0 {
			delete(k.locks, key)
		}
		k.mu.Unlock()
	}
}
