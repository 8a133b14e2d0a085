// Command cubepod-csi-driver is the local cluster's CSI driver: volumes and snapshots as image
// files on a filesystem that clones files, one node's, served to the kubelet and Kubernetes'
// CSI sidecars (external-provisioner, -snapshotter, -resizer) on a Unix socket.
//
// Configuration, from the environment:
//
//	CSI_DRIVER_NAME      the driver's name (local.csi.cubeplex.ai)
//	NODE_NAME            the node's name, as the kubelet knows it (required)
//	CSI_ENDPOINT         the CSI socket (required)
//	CSI_POOL             the pool's directory, on XFS made with reflink or on btrfs (required)
//	KUBELET_REGISTRATION the kubelet's plugins_registry directory; unset, the driver does not
//	                     announce itself (a test calling it directly)
package main

import (
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"syscall"

	"cubepod.local/csi-driver/driver"
	"cubepod.local/csi-driver/registration"
)

const version = "0.1.0"

func main() {
	log := slog.New(slog.NewTextHandler(os.Stderr, nil))
	if err := run(log); err != nil {
		log.Error("cubepod-csi-driver", "error", err)
		os.Exit(1)
	}
}

func run(log *slog.Logger) error {
	name := env("CSI_DRIVER_NAME", "local.csi.cubeplex.ai")
	node, endpoint, pool := os.Getenv("NODE_NAME"), os.Getenv("CSI_ENDPOINT"), os.Getenv("CSI_POOL")
	for k, v := range map[string]string{"NODE_NAME": node, "CSI_ENDPOINT": endpoint, "CSI_POOL": pool} {
		if v == "" {
			return fmt.Errorf("%s is required", k)
		}
	}
	d, err := driver.New(driver.Config{Name: name, Version: version, NodeID: node, Pool: pool}, log)
	if err != nil {
		return err
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	if dir := os.Getenv("KUBELET_REGISTRATION"); dir != "" {
		go func() {
			if err := registration.Serve(ctx, dir, name, endpoint, log); err != nil {
				log.Error("registration", "error", err)
				stop()
			}
		}()
	}
	return d.Serve(ctx, endpoint)
}

func env(key, fallback string) string {
	if v := os.Getenv(key); v != "" {
		return v
	}
	return fallback
}
