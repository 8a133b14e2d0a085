package egressagent

import (
	"fmt"
	"net/netip"
	"slices"

	"github.com/google/nftables"
	"github.com/google/nftables/binaryutil"
	"github.com/google/nftables/expr"
	"golang.org/x/sys/unix"
)

// Table is the agent's nftables table in the node's network namespace (IPv4; sandboxes get no
// IPv6 address on the networks CubePod supports).
const Table = "cubepod_egress_agent"

// Ports are the proxy's listeners by port class.
type Ports struct {
	HTTP, TLS, Other uint16
}

func (p Ports) all() []uint16 { return []uint16{p.HTTP, p.TLS, p.Other} }

// Ruleset is everything the table says: written whole, in one transaction, on every change.
type Ruleset struct {
	Ports Ports
	// Cluster are the cluster's own networks: TCP to them is not redirected (the network plugin's
	// NetworkPolicy decides it by its real destination), and the sandbox's policy is applied to it
	// by address like any non-TCP packet.
	Cluster []netip.Prefix
	// Sandboxes are the policed sandboxes by Pod address.
	Sandboxes map[netip.Addr]Policy
}

// Apply replaces the table with the ruleset; it needs CAP_NET_ADMIN in the namespace.
//
//   - prerouting (nat): the TCP outside the cluster of a sandbox that may reach domains is
//     redirected to the proxy, to the listener of its port class (only the proxy sees names), and
//     the HTTP and HTTPS of one whose rules set headers;
//     a sandbox whose rules are addresses alone is decided in the table, at the kernel's speed;
//   - input and forward (filter): replies pass; the proxy's ports take only redirected connections
//     of policed sandboxes; every other new packet of a policed sandbox is decided by its allowed
//     and denied addresses (E2B's order), and refused when denied.
//
// A drop here is final whatever the network plugin decides after; an accept still needs its.
func (r Ruleset) Apply(conn *nftables.Conn) error {
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: Table}
	// Adding before deleting makes the delete valid whether or not the table was there.
	conn.AddTable(table)
	conn.DelTable(table)
	conn.AddTable(table)

	addrs := make([]netip.Addr, 0, len(r.Sandboxes))
	for a := range r.Sandboxes {
		if !a.Is4() {
			return fmt.Errorf("sandbox %s: only IPv4 addresses are policed", a)
		}
		addrs = append(addrs, a)
	}
	slices.SortFunc(addrs, netip.Addr.Compare)

	policed := &nftables.Set{Table: table, Name: "policed", KeyType: nftables.TypeIPAddr}
	byName := &nftables.Set{Table: table, Name: "by_name", KeyType: nftables.TypeIPAddr}
	byRules := &nftables.Set{Table: table, Name: "by_rules", KeyType: nftables.TypeIPAddr}
	var all, named, ruled []nftables.SetElement
	for _, a := range addrs {
		all = append(all, nftables.SetElement{Key: a.AsSlice()})
		switch p := r.Sandboxes[a]; {
		case len(p.AllowDomains) > 0:
			named = append(named, nftables.SetElement{Key: a.AsSlice()})
		case len(p.Rules) > 0:
			ruled = append(ruled, nftables.SetElement{Key: a.AsSlice()})
		}
	}
	if err := conn.AddSet(policed, all); err != nil {
		return err
	}
	if err := conn.AddSet(byName, named); err != nil {
		return err
	}
	if err := conn.AddSet(byRules, ruled); err != nil {
		return err
	}
	cluster, err := addIntervalSet(conn, table, "cluster", r.Cluster)
	if err != nil {
		return err
	}

	nat := conn.AddChain(&nftables.Chain{Name: "redirect", Table: table, Type: nftables.ChainTypeNAT,
		Hooknum: nftables.ChainHookPrerouting, Priority: nftables.ChainPriorityNATDest})
	// A sandbox whose rules set headers but name no domain to reach has its HTTP and HTTPS
	// redirected only: the proxy applies rules there, and nowhere else.
	for _, to := range []struct {
		from  *nftables.Set
		dport uint16
		port  uint16
	}{{byName, 80, r.Ports.HTTP}, {byName, 443, r.Ports.TLS}, {byName, 0, r.Ports.Other},
		{byRules, 80, r.Ports.HTTP}, {byRules, 443, r.Ports.TLS}} {
		exprs := slices.Concat(sourceIn(to.from), destinationIn(cluster, true), isTCP())
		if to.dport != 0 {
			exprs = append(exprs, destinationPort(to.dport)...)
		}
		exprs = append(exprs,
			&expr.Immediate{Register: 1, Data: binaryutil.BigEndian.PutUint16(to.port)},
			&expr.Redir{RegisterProtoMin: 1, Flags: unix.NF_NAT_RANGE_PROTO_SPECIFIED})
		conn.AddRule(&nftables.Rule{Table: table, Chain: nat, Exprs: exprs})
	}

	decide := conn.AddChain(&nftables.Chain{Name: "decide", Table: table})
	for i, a := range addrs {
		p := r.Sandboxes[a]
		if len(p.AllowCIDRs) > 0 {
			set, err := addIntervalSet(conn, table, fmt.Sprintf("allow%d", i), p.AllowCIDRs)
			if err != nil {
				return err
			}
			conn.AddRule(&nftables.Rule{Table: table, Chain: decide, Exprs: slices.Concat(
				sourceIs(a), destinationIn(set, false), verdict(expr.VerdictAccept))})
		}
		if len(p.DenyCIDRs) > 0 {
			set, err := addIntervalSet(conn, table, fmt.Sprintf("deny%d", i), p.DenyCIDRs)
			if err != nil {
				return err
			}
			conn.AddRule(&nftables.Rule{Table: table, Chain: decide, Exprs: slices.Concat(
				sourceIs(a), destinationIn(set, false),
				[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_ICMP_UNREACH, Code: icmpAdminProhibited}})})
		}
	}

	for _, base := range []struct {
		name string
		hook *nftables.ChainHook
	}{{"input", nftables.ChainHookInput}, {"forward", nftables.ChainHookForward}} {
		hook := base.hook
		chain := conn.AddChain(&nftables.Chain{Name: base.name, Table: table,
			Type: nftables.ChainTypeFilter, Hooknum: hook, Priority: beforeFilter})
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: slices.Concat(
			established(), verdict(expr.VerdictAccept))})
		if hook == nftables.ChainHookInput {
			for _, port := range r.Ports.all() {
				// The proxy serves what the redirect sent it, and nothing that came straight.
				conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: slices.Concat(
					sourceIn(policed), redirected(), isTCP(), destinationPort(port), verdict(expr.VerdictAccept))})
				conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: slices.Concat(
					isTCP(), destinationPort(port),
					[]expr.Any{&expr.Reject{Type: unix.NFT_REJECT_TCP_RST}})})
			}
		}
		conn.AddRule(&nftables.Rule{Table: table, Chain: chain, Exprs: slices.Concat(
			sourceIn(policed), []expr.Any{&expr.Verdict{Kind: expr.VerdictJump, Chain: decide.Name}})})
	}
	if err := conn.Flush(); err != nil {
		return fmt.Errorf("writing the %s table: %w", Table, err)
	}
	return nil
}

// Remove deletes the table, if it is there.
func Remove(conn *nftables.Conn) error {
	table := &nftables.Table{Family: nftables.TableFamilyIPv4, Name: Table}
	conn.AddTable(table)
	conn.DelTable(table)
	return conn.Flush()
}

// beforeFilter runs the agent's filter chains just ahead of iptables' (and so kube-router's).
var beforeFilter = nftables.ChainPriorityRef(*nftables.ChainPriorityFilter - 1)

// addIntervalSet adds a set of IPv4 ranges, encoded as nft encodes them: merged, each range a
// start element and an end element one past it (none when it runs to the last address), and an
// end element at 0.0.0.0 when the first range starts above it.
func addIntervalSet(conn *nftables.Conn, table *nftables.Table, name string, prefixes []netip.Prefix) (*nftables.Set, error) {
	set := &nftables.Set{Table: table, Name: name, KeyType: nftables.TypeIPAddr, Interval: true}
	var elems []nftables.SetElement
	for i, r := range mergeRanges(prefixes) {
		if i == 0 && r.from != 0 {
			elems = append(elems, nftables.SetElement{Key: []byte{0, 0, 0, 0}, IntervalEnd: true})
		}
		elems = append(elems, nftables.SetElement{Key: be32(r.from)})
		if r.to != ^uint32(0) {
			elems = append(elems, nftables.SetElement{Key: be32(r.to + 1), IntervalEnd: true})
		}
	}
	if err := conn.AddSet(set, elems); err != nil {
		return nil, fmt.Errorf("set %s: %w", name, err)
	}
	return set, nil
}

type addrRange struct{ from, to uint32 }

// mergeRanges turns IPv4 prefixes into sorted ranges that neither overlap nor touch, as an
// interval set needs them.
func mergeRanges(prefixes []netip.Prefix) []addrRange {
	var ranges []addrRange
	for _, p := range prefixes {
		p = p.Masked()
		if !p.Addr().Is4() {
			continue
		}
		from := u32(p.Addr())
		ranges = append(ranges, addrRange{from, from | (^uint32(0) >> p.Bits())})
	}
	slices.SortFunc(ranges, func(a, b addrRange) int {
		switch {
		case a.from < b.from:
			return -1
		case a.from > b.from:
			return 1
		}
		return 0
	})
	var merged []addrRange
	for _, r := range ranges {
		if n := len(merged); n > 0 && (merged[n-1].to == ^uint32(0) || r.from <= merged[n-1].to+1) {
			merged[n-1].to = max(merged[n-1].to, r.to)
			continue
		}
		merged = append(merged, r)
	}
	return merged
}

func u32(a netip.Addr) uint32 {
	b := a.As4()
	return uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
}

func be32(v uint32) []byte { return []byte{byte(v >> 24), byte(v >> 16), byte(v >> 8), byte(v)} }

func sourceIn(set *nftables.Set) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID},
	}
}

func sourceIs(a netip.Addr) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 12, Len: 4},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: a.AsSlice()},
	}
}

func destinationIn(set *nftables.Set, invert bool) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseNetworkHeader, Offset: 16, Len: 4},
		&expr.Lookup{SourceRegister: 1, SetName: set.Name, SetID: set.ID, Invert: invert},
	}
}

func isTCP() []expr.Any {
	return []expr.Any{
		&expr.Meta{Key: expr.MetaKeyL4PROTO, Register: 1},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: []byte{unix.IPPROTO_TCP}},
	}
}

func destinationPort(port uint16) []expr.Any {
	return []expr.Any{
		&expr.Payload{DestRegister: 1, Base: expr.PayloadBaseTransportHeader, Offset: 2, Len: 2},
		&expr.Cmp{Op: expr.CmpOpEq, Register: 1, Data: binaryutil.BigEndian.PutUint16(port)},
	}
}

func established() []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATE, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: native(expr.CtStateBitESTABLISHED | expr.CtStateBitRELATED), Xor: native(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native(0)},
	}
}

// redirected matches connections the redirect rule (a destination NAT) changed.
func redirected() []expr.Any {
	return []expr.Any{
		&expr.Ct{Key: expr.CtKeySTATUS, Register: 1},
		&expr.Bitwise{SourceRegister: 1, DestRegister: 1, Len: 4,
			Mask: native(ipsDstNAT), Xor: native(0)},
		&expr.Cmp{Op: expr.CmpOpNeq, Register: 1, Data: native(0)},
	}
}

func verdict(kind expr.VerdictKind) []expr.Any { return []expr.Any{&expr.Verdict{Kind: kind}} }

func native(v uint32) []byte { return binaryutil.NativeEndian.PutUint32(v) }

// ipsDstNAT is conntrack's IPS_DST_NAT status bit (linux/netfilter/nf_conntrack_common.h).
const ipsDstNAT = 1 << 5

// icmpAdminProhibited is ICMP's "communication administratively prohibited" (RFC 1812), what
// nft's `reject with icmp type admin-prohibited` sends.
const icmpAdminProhibited = 13
