package main

import (
	"strings"
	"testing"
)

func TestLoad(t *testing.T) {
	key := "A6EHv/POEL4dcN0Y50vAmWfk1jCbpQ1fHdyGZBJVMbg="
	env := func(m map[string]string) func(string) string { return func(k string) string { return m[k] } }
	c, err := load(env(map[string]string{"CUBEPOD_CONTROL_PUBLIC_KEY": key, "CUBEPOD_POD_UID": "p"}))
	if err != nil || c.port != 49983 || c.disk != "/" {
		t.Fatalf("%+v %v", c, err)
	}
	// The disk measured is the rootfs volume's, through its first directory.
	c, err = load(env(map[string]string{"CUBEPOD_CONTROL_PUBLIC_KEY": key, "CUBEPOD_POD_UID": "p", "CUBEPOD_ROOTFS_DIRS": "home,usr"}))
	if err != nil || c.disk != "/home" {
		t.Fatalf("%+v %v", c, err)
	}
	for name, tc := range map[string]struct {
		env  map[string]string
		want string
	}{
		"no key":   {map[string]string{"CUBEPOD_POD_UID": "p"}, "CUBEPOD_CONTROL_PUBLIC_KEY"},
		"bad key":  {map[string]string{"CUBEPOD_CONTROL_PUBLIC_KEY": "abc", "CUBEPOD_POD_UID": "p"}, "CUBEPOD_CONTROL_PUBLIC_KEY"},
		"no pod":   {map[string]string{"CUBEPOD_CONTROL_PUBLIC_KEY": key}, "CUBEPOD_POD_UID"},
		"bad port": {map[string]string{"CUBEPOD_CONTROL_PUBLIC_KEY": key, "CUBEPOD_POD_UID": "p", "CUBEPOD_ENVD_PORT": "70000"}, "CUBEPOD_ENVD_PORT"},
		"bad dirs": {map[string]string{"CUBEPOD_CONTROL_PUBLIC_KEY": key, "CUBEPOD_POD_UID": "p", "CUBEPOD_ROOTFS_DIRS": "usr/local"}, "CUBEPOD_ROOTFS_DIRS"},
	} {
		if _, err := load(env(tc.env)); err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: %v", name, err)
		}
	}
}
