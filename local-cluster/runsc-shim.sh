#!/bin/sh
# containerd-shim-runsc-v1 as the real node's containerd (Debian's 1.6) runs it. gVisor's shim is
# built on containerd 2's shim library, whose `start` prints {"version":2,"address":...,
# "protocol":"ttrpc"}; containerd 1.6 reads that output as the bare address. Only `start` is
# translated; the shim's daemon re-executes the real binary, so this script stays out of the way.
real=$(dirname "$0")/containerd-shim-runsc-v1.real
eval "action=\${$#}"
[ "$action" = start ] || exec "$real" "$@"
out=$("$real" "$@" 2>&1) || {
  printf '%s\n' "$out" >&2
  exit 1
}
addr=$(printf '%s' "$out" | sed -n 's/.*"address":"\([^"]*\)".*/\1/p')
printf '%s\n' "${addr:-$out}"
