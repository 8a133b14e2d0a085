package egressagent

import (
	"context"
	"encoding/json"
	"fmt"
	"log"
	"net/netip"
	"sync/atomic"
	"time"

	"github.com/google/nftables"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Agent keeps its node's table and proxy in step with the node's sandbox Pods: it watches them
// (its node's only, sandbox Pods only), applies the plan whenever what it enforces would change,
// and then answers each Pod whose egress it now enforces.
type Agent struct {
	Client    kubernetes.Interface
	Node      string
	Ports     Ports
	Cluster   []netip.Prefix
	Resolvers []netip.Prefix
	// Metrics counts its table's writes (nil: none).
	Metrics *Metrics
	// Authority mints the CAs of sandboxes with rules, which its proxy (Proxy.Transforms)
	// applies; nil: it applies no rules, and refuses policies with them.
	Authority *Authority

	policies atomic.Pointer[map[netip.Addr]Policy]
	applied  string
	ready    atomic.Bool
}

// Policy is the proxy's lookup: the enforced policy of the sandbox at src.
func (a *Agent) Policy(src netip.Addr) (Policy, bool) {
	m := a.policies.Load()
	if m == nil {
		return Policy{}, false
	}
	p, ok := (*m)[src]
	return p, ok
}

// Ready is true once the node's Pods were read and their plan applied.
func (a *Agent) Ready() bool { return a.ready.Load() }

// Run watches until ctx ends.
func (a *Agent) Run(ctx context.Context) error {
	factory := informers.NewSharedInformerFactoryWithOptions(a.Client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("spec.nodeName", a.Node).String()
			o.LabelSelector = LabelTemplate
		}))
	pods := factory.Core().V1().Pods()
	kick := make(chan struct{}, 1)
	poke := func() {
		select {
		case kick <- struct{}{}:
		default:
		}
	}
	if _, err := pods.Informer().AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { poke() },
		UpdateFunc: func(before, after any) { poke() },
		DeleteFunc: func(any) { poke() },
	}); err != nil {
		return err
	}
	factory.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), pods.Informer().HasSynced) {
		return ctx.Err()
	}
	poke()
	retry := time.NewTimer(time.Hour)
	retry.Stop()
	for {
		select {
		case <-ctx.Done():
			factory.Shutdown()
			return nil
		case <-kick:
		case <-retry.C:
		}
		list, err := pods.Lister().List(labels.Everything())
		if err == nil {
			err = a.reconcile(ctx, list)
		}
		if err != nil {
			log.Printf("egress agent: %v; trying again", err)
			retry.Reset(time.Second)
		}
	}
}

// reconcile applies the plan for the Pods when it changes what is enforced, then answers.
func (a *Agent) reconcile(ctx context.Context, pods []*corev1.Pod) error {
	plan := PlanFor(pods, a.Resolvers, a.Authority != nil)
	if key := plan.Key(); key != a.applied || !a.ready.Load() {
		conn, err := nftables.New()
		if err != nil {
			return fmt.Errorf("netlink: %w", err)
		}
		start := time.Now()
		err = (Ruleset{Ports: a.Ports, Cluster: a.Cluster, Sandboxes: plan.Sandboxes}).Apply(conn)
		if a.Metrics != nil {
			result := "ok"
			if err != nil {
				result = "error"
			}
			a.Metrics.applies.WithLabelValues(result).Inc()
			a.Metrics.applyTime.Observe(time.Since(start).Seconds())
			if err == nil {
				a.Metrics.policed.Set(float64(len(plan.Sandboxes)))
			}
		}
		if err != nil {
			return err
		}
		a.policies.Store(&plan.Sandboxes)
		a.applied = key
		if !a.ready.Swap(true) {
			log.Printf("egress agent: enforcing for %d sandboxes on %s", len(plan.Sandboxes), a.Node)
		}
	}
	annotations, err := a.annotations(pods, plan)
	if err != nil {
		return err
	}
	for pod, values := range annotations {
		patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"annotations": values}})
		_, err := a.Client.CoreV1().Pods(pod.Namespace).Patch(ctx, pod.Name, types.MergePatchType, patch, metav1.PatchOptions{FieldManager: "cubepod-egress-agent"})
		if err != nil && !errors.IsNotFound(err) {
			return fmt.Errorf("answering %s/%s: %w", pod.Namespace, pod.Name, err)
		}
	}
	return nil
}

// podName names a Pod.
type podName struct{ Namespace, Name string }

// annotations are what the agent writes on Pods: the plan's answers, and the CA of each sandbox
// with rules, in the same patch as its answer, so that a sandbox is never told its rules hold
// before its CA is there to trust.
func (a *Agent) annotations(pods []*corev1.Pod, plan Plan) (map[podName]map[string]string, error) {
	out := map[podName]map[string]string{}
	set := func(pod podName, key, value string) {
		if out[pod] == nil {
			out[pod] = map[string]string{}
		}
		out[pod][key] = value
	}
	for _, answer := range plan.Answers {
		set(podName{answer.Namespace, answer.Name}, AnnotationEgressApplied, answer.Value)
	}
	if a.Authority == nil {
		return out, nil
	}
	live := map[string]bool{}
	for _, pod := range pods {
		addr, err := netip.ParseAddr(pod.Status.PodIP)
		if err != nil {
			continue
		}
		policy, ok := plan.Sandboxes[addr]
		if !ok || len(policy.Rules) == 0 || policy.PodUID != string(pod.UID) {
			continue
		}
		live[policy.PodUID] = true
		published := pod.Annotations[AnnotationEgressCA]
		ca, err := a.Authority.CA(policy.PodUID, []byte(published))
		if err != nil {
			return nil, fmt.Errorf("the CA of %s/%s: %w", pod.Namespace, pod.Name, err)
		}
		if string(ca) != published {
			set(podName{pod.Namespace, pod.Name}, AnnotationEgressCA, string(ca))
		}
	}
	a.Authority.Retain(live)
	return out, nil
}
