// Command podd is CubePod's in-sandbox daemon, compatible with E2B's envd: the filesystem and
// process services (Connect, JSON or binary), /files, /health, /init, /envs and /metrics on
// CUBEPOD_ENVD_PORT (49983) on every address. Every call but GET /health must carry the
// gateway's credential for this Pod and its box (package control): CUBEPOD_CONTROL_PUBLIC_KEY
// and CUBEPOD_POD_UID say what to check it against, and podd does not start without them.
//
// It is a static program, so that the podd-installer can copy it into any image.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"
	"time"

	"cubepod.local/podd/control"
	"cubepod.local/podd/core"
	"cubepod.local/podd/daemon"
	"cubepod.local/podd/rootfs"
)

// config is podd's settings, from the environment the CubePod webhook gives the container.
type config struct {
	port   int
	guard  *control.Guard
	podUID string
	// disk is where the sandbox's root writes land: the first of the rootfs volume's
	// directories (CUBEPOD_ROOTFS_DIRS), else the root.
	disk string
}

func load(env func(string) string) (*config, error) {
	c := &config{port: 49983, disk: "/"}
	if raw := env("CUBEPOD_ROOTFS_DIRS"); strings.TrimSpace(raw) != "" {
		dirs, err := rootfs.Dirs(raw)
		if err != nil {
			return nil, fmt.Errorf("CUBEPOD_ROOTFS_DIRS: %w", err)
		}
		c.disk = "/" + dirs[0]
	}
	if v := env("CUBEPOD_ENVD_PORT"); v != "" {
		p, err := strconv.Atoi(v)
		if err != nil || p < 1 || p > 65535 {
			return nil, fmt.Errorf("CUBEPOD_ENVD_PORT: expected a port from 1 to 65535, got %q", v)
		}
		c.port = p
	}
	key, err := control.ParsePublicKey(env("CUBEPOD_CONTROL_PUBLIC_KEY"))
	if err != nil {
		return nil, fmt.Errorf("CUBEPOD_CONTROL_PUBLIC_KEY: %v (the CubePod webhook injects it)", err)
	}
	c.podUID = env("CUBEPOD_POD_UID")
	if c.podUID == "" {
		return nil, fmt.Errorf("CUBEPOD_POD_UID is not set (the CubePod webhook injects it)")
	}
	c.guard = control.NewGuard(key, c.podUID)
	return c, nil
}

func main() {
	c, err := load(os.Getenv)
	if err != nil {
		log.Fatalf("podd: %v", err)
	}
	session := core.NewSession(map[string]string{"E2B_SANDBOX": "true"})
	d := daemon.New(c.guard, session)
	d.MeasureDisk(c.disk)
	if os.Getpid() == 1 {
		d.ReapOrphans()
	}
	srv := &http.Server{
		Addr:    ":" + strconv.Itoa(c.port),
		Handler: d,
		// Streams (process output, watches) last as long as they need; only a client that
		// never finishes its headers is cut off.
		ReadHeaderTimeout: 10 * time.Second,
		IdleTimeout:       640 * time.Second,
	}
	log.Printf("podd %s listening on :%d", daemon.Version, c.port)
	log.Fatal(srv.ListenAndServe())
}
