// Command cubepod-egress-agent enforces the egress of the sandboxes on its node, from the node's
// network namespace (package egressagent; decision 0028).
//
//	cubepod-egress-agent          runs: watches its node's sandbox Pods, keeps the nftables table
//	                              and serves the proxy
//	cubepod-egress-agent remove   deletes the table (the node's sandboxes are then not policed)
//
// Settings, from the environment:
//
//	NODE_NAME                      the node it runs on (required)
//	KUBECONFIG                     a kubeconfig file; unset: the Pod's service account
//	CUBEPOD_CLUSTER_NETWORKS       the cluster's networks, comma-separated (required): never
//	                               redirected, never dialed by name
//	CUBEPOD_EGRESS_AGENT_PORTS     the proxy's ports for port 80, port 443 and the others
//	                               (default 15080,15443,15001)
//	CUBEPOD_EGRESS_AGENT_HEALTH    address of /healthz and /metrics (default 127.0.0.1:15021)
//	CUBEPOD_EGRESS_RESOLVERS       the sandboxes' DNS servers, comma-separated: allowed to a
//	                               sandbox that may reach domains; the proxy resolves through the
//	                               first (unset: the node's resolver)
//	CUBEPOD_EGRESS_AGENT_SOURCE    the address the proxy dials from (unset: the kernel's choice),
//	                               for a node that routes its sandboxes' traffic by source
//	CUBEPOD_EGRESS_AGENT_STATE     a directory of its own on the node, where it keeps the root key
//	                               of its sandboxes' CAs: set, it applies rules (headers set on a
//	                               sandbox's requests to a domain); unset, it applies none and
//	                               refuses the policies that have them
//	CUBEPOD_EGRESS_SECRET_NAME     the Secret, in each sandbox's namespace, whose keys rules name
//	                               as ${e2b.secrets.NAME} (default cubepod-egress-secrets)
//	CUBEPOD_EGRESS_UPSTREAM_CA     a PEM file of CAs trusted beside the node's for the domains
//	                               rules name
package main

import (
	"context"
	"crypto/x509"
	"fmt"
	"log"
	"net"
	"net/http"
	"net/netip"
	"os"
	"os/signal"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/google/nftables"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"

	"cubepod.local/podd/egressagent"
)

func main() {
	if len(os.Args) == 2 && os.Args[1] == "remove" {
		conn, err := nftables.New()
		if err == nil {
			err = egressagent.Remove(conn)
		}
		if err != nil {
			fail("%v", err)
		}
		return
	}
	if len(os.Args) != 1 {
		fail("usage: cubepod-egress-agent [remove]")
	}
	node := os.Getenv("NODE_NAME")
	if node == "" {
		fail("NODE_NAME: required, the node this agent runs on")
	}
	cluster, err := prefixes("CUBEPOD_CLUSTER_NETWORKS", true)
	if err != nil {
		fail("%v", err)
	}
	resolvers, err := prefixes("CUBEPOD_EGRESS_RESOLVERS", false)
	if err != nil {
		fail("%v", err)
	}
	ports, err := portsFrom(os.Getenv("CUBEPOD_EGRESS_AGENT_PORTS"))
	if err != nil {
		fail("CUBEPOD_EGRESS_AGENT_PORTS: %v", err)
	}
	health := os.Getenv("CUBEPOD_EGRESS_AGENT_HEALTH")
	if health == "" {
		health = "127.0.0.1:15021"
	}
	config, err := restConfig()
	if err != nil {
		fail("%v", err)
	}
	client, err := kubernetes.NewForConfig(config)
	if err != nil {
		fail("%v", err)
	}

	metrics := egressagent.NewMetrics()
	agent := &egressagent.Agent{Client: client, Node: node, Ports: ports, Cluster: cluster, Resolvers: resolvers, Metrics: metrics}
	proxy := &egressagent.Proxy{Policy: agent.Policy, NeverByName: cluster, Metrics: metrics}
	if raw := os.Getenv("CUBEPOD_EGRESS_AGENT_SOURCE"); raw != "" {
		if proxy.Source, err = netip.ParseAddr(raw); err != nil {
			fail("CUBEPOD_EGRESS_AGENT_SOURCE: %q is not an address", raw)
		}
	}
	if len(resolvers) > 0 {
		server := net.JoinHostPort(resolvers[0].Addr().String(), "53")
		proxy.Resolver = &net.Resolver{PreferGo: true, Dial: func(ctx context.Context, network, _ string) (net.Conn, error) {
			d := &net.Dialer{Timeout: 5 * time.Second}
			if proxy.Source.IsValid() {
				if network == "udp" || network == "udp4" {
					d.LocalAddr = &net.UDPAddr{IP: proxy.Source.AsSlice()}
				} else {
					d.LocalAddr = &net.TCPAddr{IP: proxy.Source.AsSlice()}
				}
			}
			return d.DialContext(ctx, network, server)
		}}
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	if state := os.Getenv("CUBEPOD_EGRESS_AGENT_STATE"); state != "" {
		transforms, err := transformsFrom(ctx, client, state)
		if err != nil {
			fail("%v", err)
		}
		agent.Authority, proxy.Transforms = transforms.Authority, transforms
	}
	for _, l := range []struct {
		port  uint16
		class egressagent.PortClass
	}{{ports.HTTP, egressagent.ClassHTTP}, {ports.TLS, egressagent.ClassTLS}, {ports.Other, egressagent.ClassOther}} {
		ln, err := net.Listen("tcp4", fmt.Sprintf("0.0.0.0:%d", l.port))
		if err != nil {
			fail("%v", err)
		}
		go func() {
			if err := proxy.Serve(ln, l.class); err != nil {
				fail("proxy (%s): %v", l.class, err)
			}
		}()
	}
	go func() {
		mux := http.NewServeMux()
		mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
			if !agent.Ready() {
				http.Error(w, "not yet enforcing", http.StatusServiceUnavailable)
				return
			}
			_, _ = w.Write([]byte("ok\n"))
		})
		mux.Handle("GET /metrics", promhttp.HandlerFor(metrics.Registry, promhttp.HandlerOpts{}))
		fail("health: %v", http.ListenAndServe(health, mux))
	}()

	log.Printf("egress agent on %s: proxy on ports %d (80), %d (443), %d (others)", node, ports.HTTP, ports.TLS, ports.Other)
	// The table stays when the agent stops: redirected connections then find no proxy, so the
	// node's sandboxes stay inside their policy until it is back.
	if err := agent.Run(ctx); err != nil {
		fail("%v", err)
	}
}

// transformsFrom sets up the rules' side: the CAs from the state directory, the secrets from a
// watch of their Secrets, the CAs the domains' certificates are verified with.
func transformsFrom(ctx context.Context, client kubernetes.Interface, state string) (*egressagent.Transforms, error) {
	authority, err := egressagent.LoadAuthority(state)
	if err != nil {
		return nil, fmt.Errorf("CUBEPOD_EGRESS_AGENT_STATE: %w", err)
	}
	roots, err := x509.SystemCertPool()
	if err != nil {
		roots = x509.NewCertPool()
	}
	if file := os.Getenv("CUBEPOD_EGRESS_UPSTREAM_CA"); file != "" {
		pem, err := os.ReadFile(file)
		if err != nil {
			return nil, fmt.Errorf("CUBEPOD_EGRESS_UPSTREAM_CA: %w", err)
		}
		if !roots.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("CUBEPOD_EGRESS_UPSTREAM_CA: %s holds no PEM certificate", file)
		}
	}
	name := os.Getenv("CUBEPOD_EGRESS_SECRET_NAME")
	if name == "" {
		name = "cubepod-egress-secrets"
	}
	secrets := egressagent.NewSecrets(client, name)
	go func() {
		// Unread, each request that needs a secret is answered 502 naming why; the rest goes on.
		if err := secrets.Run(ctx); err != nil {
			log.Printf("egress agent: %v", err)
		}
	}()
	return &egressagent.Transforms{Authority: authority, Secrets: secrets.Lookup, RootCAs: roots}, nil
}

func restConfig() (*rest.Config, error) {
	if path := os.Getenv("KUBECONFIG"); path != "" {
		return clientcmd.BuildConfigFromFlags("", path)
	}
	return rest.InClusterConfig()
}

// prefixes reads a comma-separated list of CIDRs or addresses.
func prefixes(name string, required bool) ([]netip.Prefix, error) {
	raw := strings.TrimSpace(os.Getenv(name))
	if raw == "" {
		if required {
			return nil, fmt.Errorf("%s: required", name)
		}
		return nil, nil
	}
	var out []netip.Prefix
	for _, s := range strings.Split(raw, ",") {
		s = strings.TrimSpace(s)
		p, err := netip.ParsePrefix(s)
		if err != nil {
			a, aerr := netip.ParseAddr(s)
			if aerr != nil {
				return nil, fmt.Errorf("%s: %q is not a CIDR or an address", name, s)
			}
			p = netip.PrefixFrom(a, a.BitLen())
		}
		out = append(out, p.Masked())
	}
	return out, nil
}

func portsFrom(raw string) (egressagent.Ports, error) {
	if raw == "" {
		raw = "15080,15443,15001"
	}
	parts := strings.Split(raw, ",")
	if len(parts) != 3 {
		return egressagent.Ports{}, fmt.Errorf("expected three ports, got %q", raw)
	}
	var n [3]uint16
	for i, p := range parts {
		v, err := strconv.ParseUint(strings.TrimSpace(p), 10, 16)
		if err != nil || v == 0 {
			return egressagent.Ports{}, fmt.Errorf("%q is not a port", p)
		}
		n[i] = uint16(v)
	}
	return egressagent.Ports{HTTP: n[0], TLS: n[1], Other: n[2]}, nil
}

func fail(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "cubepod-egress-agent: "+format+"\n", args...)
	os.Exit(1)
}
