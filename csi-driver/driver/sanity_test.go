package driver_test

import (
	"context"
	"log/slog"
	"os"
	"path/filepath"
	"testing"

	"github.com/kubernetes-csi/csi-test/v5/pkg/sanity"
	. "github.com/onsi/ginkgo/v2"
	. "github.com/onsi/gomega"

	"cubepod.local/csi-driver/driver"
	"cubepod.local/csi-driver/internal/xfstest"
)

/*
 * The CSI project's own conformance suite, csi-sanity, against the driver on a real pool: an XFS
 * filesystem made with reflink on a loop device, as the local cluster's node has. It runs once
 * for Filesystem volumes and once for Block volumes. It needs root (loop devices, mounts).
 */

var (
	mountConfig = sanity.NewTestConfig()
	blockConfig = sanity.NewTestConfig()
)

var _ = Describe("Filesystem volumes", func() { sanity.GinkgoTest(&mountConfig) })
var _ = Describe("Block volumes", func() { sanity.GinkgoTest(&blockConfig) })

func TestSanity(t *testing.T) {
	dir := t.TempDir()
	poolDir := filepath.Join(xfstest.Mount(t, dir), "pool")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	socket := filepath.Join(dir, "csi.sock")
	d, err := driver.New(driver.Config{Name: "local.csi.cubeplex.ai", Version: "test", NodeID: "sanity-node", Pool: poolDir},
		slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelWarn})))
	if err != nil {
		t.Fatal(err)
	}
	go func() {
		if err := d.Serve(ctx, socket); err != nil {
			t.Error(err)
		}
	}()
	for _, c := range []*sanity.TestConfig{&mountConfig, &blockConfig} {
		c.Address = "unix://" + socket
		c.TestVolumeSize = 64 << 20
		c.TestVolumeExpandSize = 128 << 20
		c.IdempotentCount = 3
	}
	mountConfig.TargetPath = filepath.Join(dir, "fs-target")
	mountConfig.StagingPath = filepath.Join(dir, "fs-staging")
	blockConfig.TestVolumeAccessType = "block"
	blockConfig.TargetPath = filepath.Join(dir, "block-target")
	blockConfig.StagingPath = filepath.Join(dir, "block-staging")
	RegisterFailHandler(Fail)
	RunSpecs(t, "csi-sanity")
}
