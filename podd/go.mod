module cubepod.local/podd

go 1.25

require (
	connectrpc.com/connect v1.19.1
	github.com/creack/pty v1.1.24
	github.com/fsnotify/fsnotify v1.9.0
	github.com/google/nftables v0.3.0
	golang.org/x/sys v0.28.0
	google.golang.org/protobuf v1.36.11
)

require (
	github.com/google/go-cmp v0.7.0 // indirect
	github.com/mdlayher/netlink v1.7.3-0.20250113171957-fbb4dce95f42 // indirect
	github.com/mdlayher/socket v0.5.0 // indirect
	golang.org/x/net v0.33.0 // indirect
	golang.org/x/sync v0.6.0 // indirect
)
