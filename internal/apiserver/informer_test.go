package apiserver

import (
	"context"
	"net/http/httptest"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"
)

// TestClientGoInformerSyncs runs an unmodified client-go informer, which
// streams its initial list (sendInitialEvents) and waits for the bookmark
// that ends it.
func TestClientGoInformerSyncs(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("inf-1").obj()), 201)
	srv := httptest.NewTLSServer(testAPI.Handler())
	defer srv.Close()
	cfg := &rest.Config{Host: srv.URL, BearerToken: "admin", TLSClientConfig: rest.TLSClientConfig{Insecure: true}}
	dc, err := dynamic.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	f := dynamicinformer.NewFilteredDynamicSharedInformerFactory(dc, 0, ns, nil)
	inf := f.ForResource(schema.GroupVersionResource{Version: "v1", Resource: "pods"}).Informer()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	f.Start(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		t.Fatal("client-go informer did not sync")
	}
	if n := len(inf.GetStore().List()); n != 1 {
		t.Fatalf("informer has %d pods, want 1", n)
	}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("inf-2").obj()), 201)
	for len(inf.GetStore().List()) != 2 {
		if ctx.Err() != nil {
			t.Fatal("informer missed a new pod")
		}
		time.Sleep(20 * time.Millisecond)
	}
}
