// Package registration announces the driver to the kubelet through its plugin watcher: a socket
// in the kubelet's plugins_registry directory that answers the Registration service, what
// Kubernetes' node-driver-registrar serves for drivers that do not do it themselves.
package registration

import (
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"

	"google.golang.org/grpc"
	registerapi "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
)

// csiVersions are the CSI versions the driver speaks, as the kubelet asks them.
var csiVersions = []string{"1.0.0"}

type server struct {
	registerapi.UnimplementedRegistrationServer
	name, endpoint string
	log            *slog.Logger
}

func (s *server) GetInfo(context.Context, *registerapi.InfoRequest) (*registerapi.PluginInfo, error) {
	return &registerapi.PluginInfo{
		Type:              registerapi.CSIPlugin,
		Name:              s.name,
		Endpoint:          s.endpoint,
		SupportedVersions: csiVersions,
	}, nil
}

func (s *server) NotifyRegistrationStatus(_ context.Context, st *registerapi.RegistrationStatus) (*registerapi.RegistrationStatusResponse, error) {
	if st.PluginRegistered {
		s.log.Info("the kubelet registered the driver", "driver", s.name)
	} else {
		s.log.Error("the kubelet refused the driver", "driver", s.name, "error", st.Error)
	}
	return &registerapi.RegistrationStatusResponse{}, nil
}

// Serve answers the kubelet's plugin watcher at dir/<name>-reg.sock, naming the CSI endpoint,
// until the context ends; the socket goes with it, which unregisters the driver.
func Serve(ctx context.Context, dir, name, endpoint string, log *slog.Logger) error {
	socket := filepath.Join(dir, name+"-reg.sock")
	if err := os.MkdirAll(dir, 0o750); err != nil {
		return err
	}
	if err := os.Remove(socket); err != nil && !errors.Is(err, os.ErrNotExist) {
		return err
	}
	l, err := net.Listen("unix", socket)
	if err != nil {
		return err
	}
	g := grpc.NewServer()
	registerapi.RegisterRegistrationServer(g, &server{name: name, endpoint: endpoint, log: log})
	go func() {
		<-ctx.Done()
		g.Stop()
		os.Remove(socket)
	}()
	log.Info("announcing the driver to the kubelet", "socket", socket)
	return g.Serve(l)
}
