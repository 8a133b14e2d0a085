package main

import (
	"strings"
	"testing"
)

func TestFillConfig(t *testing.T) {
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	dirs, image, err := fillConfig(env(map[string]string{"CUBEPOD_ROOTFS_DIRS": "usr,etc", "CUBEPOD_ROOTFS_IMAGE": "debian:13"}))
	if err != nil || strings.Join(dirs, " ") != "usr etc" || image != "debian:13" {
		t.Fatalf("%v %q %v", dirs, image, err)
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no dirs":  {map[string]string{"CUBEPOD_ROOTFS_IMAGE": "i"}, "CUBEPOD_ROOTFS_DIRS"},
		"no image": {map[string]string{"CUBEPOD_ROOTFS_DIRS": "usr"}, "CUBEPOD_ROOTFS_IMAGE"},
		"bad dirs": {map[string]string{"CUBEPOD_ROOTFS_DIRS": "usr,,etc", "CUBEPOD_ROOTFS_IMAGE": "i"}, "one top-level name"},
	} {
		if _, _, err := fillConfig(env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
