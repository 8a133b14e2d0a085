// Package egress is the egress sidecar's side of a sandbox: the rules that leave the sandbox's
// own traffic no way out but the sidecar, and the sidecar's proxy.
//
// The rules live in the Pod's network namespace (one table, output hook) and accept loopback
// (the sandbox reaching the sidecar), replies of connections made to the Pod (the gateway's,
// the kubelet's probes), and packets of sockets that carry the sidecar's mark; everything else
// is rejected. Setting a socket's mark takes CAP_NET_ADMIN or CAP_NET_RAW, which the sandbox
// container does not have even as root, so its code cannot pass for the sidecar, and it cannot
// change the rules either.
package egress

import (
	"fmt"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Table is the nftables table of the rules (family inet: IPv4 and IPv6).
const Table = "cubepod_egress"

// DefaultMark is the mark the sidecar's sockets carry.
const DefaultMark uint32 = 0x4350

// Rules are the output chain's rules, in order, for the sidecar's mark.
func Rules(mark uint32) [][]expr.Any {
	accept := &expr.Verdict{Kind: expr.VerdictAccept}
	return [][]expr.Any{
		// Loopback: the sandbox talks to the sidecar (and to itself).
		{
			&expr.Meta{Key: expr.MetaKeyOIFNAME, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: ifname("lo")},
			accept,
		},
		// Replies to connections made to the Pod.
		{
			&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
			&expr.Bitwise{
				SourceRegister: 1, DestRegister: 1, Len: 4,
				Mask: native(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: native(0),
			},
			&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native(0)},
			accept,
		},
		// The sidecar's own sockets.
		{
			&expr.Meta{Key: expr.MetaKeyMARK, Register: 1},
			&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: native(mark)},
			accept,
		},
		// Anything else fails at once rather than hanging until a timeout.
		{&expr.Reject{Type: unix.NFT_REJECT_ICMPX_UNREACH, Code: unix.NFT_REJECT_ICMPX_ADMIN_PROHIBITED}},
	}
}

// Apply writes the rules into the network namespace the process is in, replacing any earlier
// table of the same name; it needs CAP_NET_ADMIN there.
func Apply(mark uint32) error {
	conn, err := nftables.New()
	if err != nil {
		return fmt.Errorf("netlink: %w", err)
	}
	table := &nftables.Table{Family: nftables.TableFamilyINet, Name: Table}
	// Adding before deleting makes the delete valid whether or not the table was there.
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)
	policy := nftables.ChainPolicyAccept
	chain := conn.AddChain(&nftables.Chain{
		Name:     "output",
		Table:    table,
		Type:     nftables.ChainTypeFilter,
		Hooknum:  nftables.ChainHookOutput,
		Priority: nftables.ChainPriorityFilter,
		Policy:   &policy,
	})
	for _, exprs := range Rules(mark) {
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: exprs})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("writing the %s table: %w", Table, err)
	}
	return nil
}

// ifname is an interface name as nftables compares it: NUL-padded to IFNAMSIZ.
func ifname(name string) []byte {
	b := make([]byte, unix.IFNAMSIZ)
	copy(b, name)
	return b
}

// native is a 32-bit value in the host's byte order, as meta and ct registers hold it.
func native(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }
