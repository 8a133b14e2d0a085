package egressagent

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes/fake"
)

func secret(ns, name string, data map[string]string) *corev1.Secret {
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}, Data: map[string][]byte{}}
	for k, v := range data {
		s.Data[k] = []byte(v)
	}
	return s
}

func TestSecretsByNamespaceFromOneName(t *testing.T) {
	client := fake.NewClientset(
		secret("tenant-a", "cubepod-egress-secrets", map[string]string{"key": "a-value"}),
		secret("tenant-b", "cubepod-egress-secrets", map[string]string{"key": "b-value"}),
		secret("tenant-c", "other", map[string]string{"key": "c-value"}),
	)
	s := NewSecrets(client, "cubepod-egress-secrets")
	if _, err := s.Lookup("tenant-a")("key"); err == nil || !strings.Contains(err.Error(), "not read yet") {
		t.Fatalf("before the watch: %v", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	done := make(chan error, 1)
	go func() { done <- s.Run(ctx) }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		if v, err := s.Lookup("tenant-a")("key"); err == nil {
			if v != "a-value" {
				t.Fatalf("tenant-a: %q", v)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the Secrets were not read")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if v, _ := s.Lookup("tenant-b")("key"); v != "b-value" {
		t.Errorf("tenant-b: %q", v)
	}
	if _, err := s.Lookup("tenant-c")("key"); err == nil || !strings.Contains(err.Error(), "no Secret cubepod-egress-secrets in namespace tenant-c") {
		t.Errorf("another Secret's name: %v", err)
	}
	if _, err := s.Lookup("tenant-a")("other"); err == nil || !strings.Contains(err.Error(), "not a key of Secret tenant-a/cubepod-egress-secrets") {
		t.Errorf("a missing key: %v", err)
	}
	// A changed Secret holds from the next lookup.
	changed := secret("tenant-a", "cubepod-egress-secrets", map[string]string{"key": "rotated"})
	if _, err := client.CoreV1().Secrets("tenant-a").Update(ctx, changed, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	for v, _ := s.Lookup("tenant-a")("key"); v != "rotated"; v, _ = s.Lookup("tenant-a")("key") {
		if time.Now().After(deadline) {
			t.Fatalf("the rotated value was not read: %q", v)
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
}
