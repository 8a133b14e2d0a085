// Package loop attaches image files to loop devices, which is how a node reaches a pool's
// volumes: as a raw device for Block volumes, and under a filesystem for the others. The kernel
// knows which file each device holds (sysfs), so a restarted driver finds its devices again.
package loop

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Of returns the loop device that holds the file, or "" when none does.
func Of(file string) (string, error) {
	want, err := filepath.Abs(file)
	if err != nil {
		return "", err
	}
	backing, _ := filepath.Glob("/sys/block/loop*/loop/backing_file")
	for _, b := range backing {
		held, err := os.ReadFile(b)
		if err != nil {
			continue // detached meanwhile
		}
		// The kernel names a removed file "... (deleted)": that device holds no file of ours.
		if strings.TrimSpace(string(held)) == want {
			return "/dev/" + filepath.Base(filepath.Dir(filepath.Dir(b))), nil
		}
	}
	return "", nil
}

// Attach returns the loop device holding the file, attaching one when none does.
func Attach(file string) (string, error) {
	if dev, err := Of(file); err != nil || dev != "" {
		return dev, err
	}
	out, err := losetup("--find", "--show", file)
	if err != nil {
		return "", err
	}
	return strings.TrimSpace(out), nil
}

// Detach releases the file's loop device, if it has one.
func Detach(file string) error {
	dev, err := Of(file)
	if err != nil || dev == "" {
		return err
	}
	_, err = losetup("--detach", dev)
	return err
}

// Refresh makes the device take the file's size again, after the file grew.
func Refresh(dev string) error {
	_, err := losetup("--set-capacity", dev)
	return err
}

// Flush writes what the device holds in its cache to the file, for a copy that is crash-consistent.
func Flush(dev string) error {
	out, err := exec.Command("blockdev", "--flushbufs", dev).CombinedOutput()
	if err != nil {
		return fmt.Errorf("blockdev --flushbufs %s: %v: %s", dev, err, strings.TrimSpace(string(out)))
	}
	return nil
}

func losetup(args ...string) (string, error) {
	out, err := exec.Command("losetup", args...).CombinedOutput()
	if err != nil {
		return "", fmt.Errorf("losetup %s: %v: %s", strings.Join(args, " "), err, strings.TrimSpace(string(out)))
	}
	return string(out), nil
}
