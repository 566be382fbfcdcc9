package controllerutil

import (
	"context"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/tools/cache"
)

func managedMeta(name string) metav1.PartialObjectMetadata {
	return metav1.PartialObjectMetadata{ObjectMeta: metav1.ObjectMeta{Name: name, ResourceVersion: "1",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "m", Operation: metav1.ManagedFieldsOperationUpdate}}}}
}

// listThenWatch is a lister-watcher that lists, then watches (as allot's
// API server answers informers), not client-go's streaming watch-list.
type listThenWatch struct{ *cache.ListWatch }

func (listThenWatch) IsWatchListSemanticsUnSupported() bool { return true }

// TestNewInformerStripsManagedFields: objects from the list and from the
// watch are cached without managedFields, the rest of their metadata kept.
func TestNewInformerStripsManagedFields(t *testing.T) {
	w := watch.NewFake()
	lw := &cache.ListWatch{
		ListWithContextFunc: func(context.Context, metav1.ListOptions) (runtime.Object, error) {
			return &metav1.PartialObjectMetadataList{ListMeta: metav1.ListMeta{ResourceVersion: "1"},
				Items: []metav1.PartialObjectMetadata{managedMeta("listed")}}, nil
		},
		WatchFuncWithContext: func(context.Context, metav1.ListOptions) (watch.Interface, error) { return w, nil },
	}
	inf := NewInformer(listThenWatch{lw}, &metav1.PartialObjectMetadata{}, 0)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	go inf.RunWithContext(ctx)
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("informer did not sync")
	}
	watched := managedMeta("watched")
	watched.ResourceVersion = "2"
	w.Add(&watched)
	for _, name := range []string{"listed", "watched"} {
		var obj any
		if !cache.WaitForCacheSync(ctx.Done(), func() bool {
			var ok bool
			obj, ok, _ = inf.GetStore().GetByKey(name)
			return ok
		}) {
			t.Fatalf("%s never cached", name)
		}
		m := obj.(*metav1.PartialObjectMetadata)
		if m.ManagedFields != nil || m.Name != name {
			t.Fatalf("cached %s = %+v; want no managedFields", name, m.ObjectMeta)
		}
	}
}
