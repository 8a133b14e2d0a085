package egressagent

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/cache"
)

// Secrets are the values rules name (${e2b.secrets.NAME}): the data keys of one Secret in each
// sandbox's namespace, of the same name everywhere, which is all the agent may read. They are
// read from a watch, so a changed Secret holds from the next request, and are kept in the agent's
// memory only.
type Secrets struct {
	// Name is the Secret's name in each namespace.
	Name string

	factory  informers.SharedInformerFactory
	informer cache.SharedIndexInformer
}

// NewSecrets follows the Secrets of a name, once Run.
func NewSecrets(client kubernetes.Interface, name string) *Secrets {
	factory := informers.NewSharedInformerFactoryWithOptions(client, 0,
		informers.WithTweakListOptions(func(o *metav1.ListOptions) {
			o.FieldSelector = fields.OneTermEqualSelector("metadata.name", name).String()
		}))
	return &Secrets{Name: name, factory: factory, informer: factory.Core().V1().Secrets().Informer()}
}

// Run watches the Secrets until ctx ends.
func (s *Secrets) Run(ctx context.Context) error {
	s.factory.Start(ctx.Done())
	synced, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	if !cache.WaitForCacheSync(synced.Done(), s.informer.HasSynced) && ctx.Err() == nil {
		return fmt.Errorf("the Secrets named %s were not read", s.Name)
	}
	<-ctx.Done()
	s.factory.Shutdown()
	return nil
}

// Lookup gives the secrets of a namespace by name.
func (s *Secrets) Lookup(namespace string) func(name string) (string, error) {
	return func(name string) (string, error) {
		if !s.informer.HasSynced() {
			return "", fmt.Errorf("secret %s: the Secrets are not read yet", name)
		}
		obj, ok, err := s.informer.GetStore().GetByKey(namespace + "/" + s.Name)
		if err != nil || !ok {
			return "", fmt.Errorf("secret %s: there is no Secret %s in namespace %s", name, s.Name, namespace)
		}
		value, ok := obj.(*corev1.Secret).Data[name]
		if !ok {
			return "", fmt.Errorf("secret %s: not a key of Secret %s/%s", name, namespace, s.Name)
		}
		return string(value), nil
	}
}
