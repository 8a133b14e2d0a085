// Command cubepod-egress is a sandbox's egress sidecar when its template asks for one.
//
//	cubepod-egress isolate   (init container, CAP_NET_ADMIN) writes the rules that leave the Pod's
//	                         traffic no way out but the sidecar's marked sockets (package egress)
//	cubepod-egress proxy     (sidecar, CAP_NET_RAW to mark its sockets) the HTTP proxy on
//	                         127.0.0.1:CUBEPOD_EGRESS_PORT, reaching CUBEPOD_EGRESS_ALLOW_HOSTS
//
// CUBEPOD_EGRESS_MARK (default 0x4350) is the mark both agree on.
package main

import (
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
	"strings"

	"cubepod.local/podd/egress"
)

func main() {
	if len(os.Args) != 2 {
		fail("usage: cubepod-egress isolate|proxy")
	}
	mark := egress.DefaultMark
	if raw := os.Getenv("CUBEPOD_EGRESS_MARK"); raw != "" {
		n, err := strconv.ParseUint(raw, 0, 32)
		if err != nil || n == 0 {
			fail("CUBEPOD_EGRESS_MARK: expected a non-zero 32-bit number, got %q", raw)
		}
		mark = uint32(n)
	}
	switch os.Args[1] {
	case "isolate":
		if err := egress.Apply(mark); err != nil {
			fail("%v", err)
		}
		log.Printf("cubepod-egress: only sockets marked %#x leave this Pod", mark)
	case "proxy":
		port := os.Getenv("CUBEPOD_EGRESS_PORT")
		if n, err := strconv.Atoi(port); err != nil || n < 1 || n > 65535 {
			fail("CUBEPOD_EGRESS_PORT: expected a port, got %q", port)
		}
		var allow []string
		if hosts := os.Getenv("CUBEPOD_EGRESS_ALLOW_HOSTS"); hosts != "" {
			allow = strings.Split(hosts, ",")
		}
		log.Printf("cubepod-egress: proxy on 127.0.0.1:%s for %d allowed hosts (none listed: any)", port, len(allow))
		log.Fatal(http.ListenAndServe("127.0.0.1:"+port, egress.NewProxy(allow, mark)))
	default:
		fail("usage: cubepod-egress isolate|proxy")
	}
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cubepod-egress: "+format+"\n", args...)
	os.Exit(1)
}
