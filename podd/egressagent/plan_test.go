package egressagent

import (
	"net/netip"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

func sandboxPod(name, ip, egress string, mutate ...func(*corev1.Pod)) *corev1.Pod {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: "t", Name: name, UID: types.UID("uid-" + name), Annotations: map[string]string{},
			CreationTimestamp: metav1.NewTime(time.Unix(1000, 0))},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: ip},
	}
	if egress != "" {
		pod.Annotations[AnnotationEgress] = egress
	}
	for _, m := range mutate {
		m(pod)
	}
	return pod
}

func TestPlanFor(t *testing.T) {
	allowList := `{"allowOut":["a.test","198.19.0.11"],"denyOut":["0.0.0.0/0"]}`
	denyList := `{"denyOut":["198.19.0.0/24"]}`
	resolver := netip.MustParsePrefix("198.19.0.53/32")
	plan := PlanFor([]*corev1.Pod{
		sandboxPod("allow", "198.18.0.2", allowList),
		sandboxPod("deny", "198.18.0.3", denyList, func(p *corev1.Pod) {
			p.Annotations[AnnotationEgressApplied] = Digest(denyList)
		}),
		sandboxPod("none", "198.18.0.4", ""),
		sandboxPod("no-address-yet", "", denyList),
		sandboxPod("done", "198.18.0.5", denyList, func(p *corev1.Pod) { p.Status.Phase = corev1.PodSucceeded }),
		sandboxPod("host", "198.18.0.6", denyList, func(p *corev1.Pod) { p.Spec.HostNetwork = true }),
		sandboxPod("bad", "198.18.0.7", `{"allowOut":["a.test"]}`),
	}, []netip.Prefix{resolver}, false)

	if len(plan.Sandboxes) != 3 {
		t.Fatalf("policed %v", plan.Key())
	}
	allow := plan.Sandboxes[netip.MustParseAddr("198.18.0.2")]
	if strings.Join(allow.AllowDomains, ",") != "a.test" || len(allow.AllowCIDRs) != 2 || allow.AllowCIDRs[1] != resolver {
		t.Errorf("allow-list with its resolver: %+v", allow)
	}
	if deny := plan.Sandboxes[netip.MustParseAddr("198.18.0.3")]; len(deny.AllowCIDRs) != 0 || len(deny.DenyCIDRs) != 1 {
		t.Errorf("deny-list: no domains, so no resolver added: %+v", deny)
	}
	if bad := plan.Sandboxes[netip.MustParseAddr("198.18.0.7")]; len(bad.DenyCIDRs) != 1 || bad.DenyCIDRs[0].Bits() != 0 {
		t.Errorf("an unreadable policy fails closed: %+v", bad)
	}
	answers := map[string]string{}
	for _, a := range plan.Answers {
		answers[a.Name] = a.Value
	}
	if len(answers) != 2 || answers["allow"] != Digest(allowList) ||
		!strings.HasPrefix(answers["bad"], "invalid: allow out contains domains") {
		t.Errorf("answers %v (the deny Pod has its answer already)", answers)
	}
}

func TestPlanForRulesOnlyWhereApplied(t *testing.T) {
	ruled := `{"rules":{"a.test":[{"transform":{"headers":{"X-Key":"${e2b.secrets.key}"}}}]}}`
	pods := []*corev1.Pod{sandboxPod("ruled", "198.18.0.2", ruled)}
	refused := PlanFor(pods, nil, false)
	if p := refused.Sandboxes[netip.MustParseAddr("198.18.0.2")]; len(p.Rules) != 0 || len(p.DenyCIDRs) != 1 {
		t.Errorf("an agent that does not apply rules lets the sandbox reach nothing: %+v", p)
	}
	if a := refused.Answers[0].Value; a != "invalid: rules are not applied by this node's egress agent" {
		t.Errorf("answer %q", a)
	}
	applied := PlanFor(pods, nil, true)
	p := applied.Sandboxes[netip.MustParseAddr("198.18.0.2")]
	if len(p.Rules) != 1 || p.Namespace != "t" || p.PodUID != "uid-ruled" {
		t.Errorf("policy %+v", p)
	}
	if applied.Answers[0].Value != Digest(ruled) {
		t.Errorf("answer %q", applied.Answers[0].Value)
	}
}

func TestPlanForAnAddressTwoPodsClaim(t *testing.T) {
	gone := sandboxPod("gone", "198.18.0.2", `{"denyOut":["0.0.0.0/0"]}`, func(p *corev1.Pod) {
		now := metav1.NewTime(time.Unix(2000, 0))
		p.DeletionTimestamp = &now
	})
	fresh := sandboxPod("fresh", "198.18.0.2", `{"denyOut":["1.2.3.4"]}`)
	for _, order := range [][]*corev1.Pod{{gone, fresh}, {fresh, gone}} {
		plan := PlanFor(order, nil, false)
		if p := plan.Sandboxes[netip.MustParseAddr("198.18.0.2")]; len(p.DenyCIDRs) != 1 || p.DenyCIDRs[0].Bits() != 32 {
			t.Errorf("the Pod not being deleted wins: %+v", p)
		}
		if len(plan.Answers) != 1 || plan.Answers[0].Name != "fresh" {
			t.Errorf("only the winner is answered: %+v", plan.Answers)
		}
	}
	older := sandboxPod("older", "198.18.0.2", `{"denyOut":["0.0.0.0/0"]}`)
	newer := sandboxPod("newer", "198.18.0.2", `{"denyOut":["1.2.3.4"]}`, func(p *corev1.Pod) {
		p.CreationTimestamp = metav1.NewTime(time.Unix(3000, 0))
	})
	if plan := PlanFor([]*corev1.Pod{newer, older}, nil, false); plan.Answers[0].Name != "newer" {
		t.Errorf("the newer Pod wins: %+v", plan.Answers)
	}
}

func TestAnswersCarryTheCAOfASandboxWithRules(t *testing.T) {
	ruled := `{"rules":{"a.test":[{"transform":{"headers":{"X-A":"b"}}}]}}`
	plain := `{"denyOut":["198.19.0.0/24"]}`
	pods := []*corev1.Pod{sandboxPod("ruled", "198.18.0.2", ruled), sandboxPod("plain", "198.18.0.3", plain)}
	authority, err := LoadAuthority(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	agent := &Agent{Authority: authority}
	got, err := agent.annotations(pods, PlanFor(pods, nil, true))
	if err != nil {
		t.Fatal(err)
	}
	ca := got[podName{"t", "ruled"}][AnnotationEgressCA]
	if !strings.Contains(ca, "BEGIN CERTIFICATE") || got[podName{"t", "ruled"}][AnnotationEgressApplied] != Digest(ruled) {
		t.Fatalf("the ruled Pod's patch: %v", got[podName{"t", "ruled"}])
	}
	if _, has := got[podName{"t", "plain"}][AnnotationEgressCA]; has {
		t.Error("a sandbox without rules gets a CA")
	}
	// Once both are written, nothing more is.
	pods[0].Annotations[AnnotationEgressCA] = ca
	pods[0].Annotations[AnnotationEgressApplied] = Digest(ruled)
	pods[1].Annotations[AnnotationEgressApplied] = Digest(plain)
	if again, _ := agent.annotations(pods, PlanFor(pods, nil, true)); len(again) != 0 {
		t.Errorf("written again: %v", again)
	}
	// A Pod gone is forgotten.
	if _, err := agent.annotations(pods[1:], PlanFor(pods[1:], nil, true)); err != nil {
		t.Fatal(err)
	}
	if len(authority.pods) != 0 {
		t.Errorf("a gone Pod's CA is kept: %d", len(authority.pods))
	}
}
