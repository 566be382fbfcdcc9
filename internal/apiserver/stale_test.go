package apiserver

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/storage"
)

// TestUpdateBehindWatchCache: an update starts from the watch cache, which
// may not have the newest version yet. A client that sends the newest
// resourceVersion must still succeed (the update starts over from etcd),
// and a client that sends an older one must still get a conflict.
func TestUpdateBehindWatchCache(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	base := "/api/v1/namespaces/" + ns + "/pods"
	expect(t, admin(t, "POST", base, makePod("p").label("round", "0").obj()), 201)
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	key := k.storageKey(ns, "p")
	behind := 0
	for i := 1; i <= 100; i++ {
		// Another writer changes the pod in etcd, behind the API server's
		// back; the cache learns of it only through its watch.
		kv, err := testStore.Get(ctx, key)
		if err != nil {
			t.Fatal(err)
		}
		rev, err := testStore.Txn(ctx, []storage.Op{storage.Update(key, kv.Value, kv.ModRevision)})
		if err != nil {
			t.Fatal(err)
		}
		if c, err := testAPI.cachedGet(ctx, k, ns, "p"); err == nil {
			if got, _ := revisionOf(c); got < rev {
				behind++
			}
		}
		var pod corev1.Pod
		admin(t, "GET", base+"/p", nil).into(t, &pod)
		pod.ResourceVersion = strconv.FormatInt(rev, 10)
		pod.Labels["round"] = strconv.Itoa(i)
		expect(t, admin(t, "PUT", base+"/p", &pod), 200, fmt.Sprintf(`"round":"%d"`, i))
		pod.ResourceVersion = strconv.FormatInt(rev, 10) // now old
		expect(t, admin(t, "PUT", base+"/p", &pod), 409, "the object has been modified")
	}
	t.Logf("the watch cache was behind etcd in %d of 100 rounds", behind)
}

// TestBindingBehindWatchCache: a binding reads its pod from the watch
// cache; when another writer changed the pod in etcd first, the
// transaction fails and the binding is tried again on the pod as that
// transaction found it. The binding must succeed and keep the other
// writer's change.
func TestBindingBehindWatchCache(t *testing.T) {
	ctx := context.Background()
	ns := newNamespace(t)
	ensureNode(t, "stale-n1")
	k := testAPI.reg.get(gvrOf(corev1.SchemeGroupVersion, "pods"))
	behind := 0
	for i := range 60 {
		name := fmt.Sprintf("p%d", i)
		path := "/api/v1/namespaces/" + ns + "/pods/" + name
		expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod(name).obj()), 201)
		// Wait until the cache has the pod, so the binding reads it there.
		for {
			if _, err := testAPI.cachedGet(ctx, k, ns, name); err == nil {
				break
			}
		}
		labelBehind(ctx, t, k, ns, name)
		if c, err := testAPI.cachedGet(ctx, k, ns, name); err == nil && len(c.(*corev1.Pod).Labels) == 0 {
			behind++
		}
		expect(t, admin(t, "POST", path+"/binding", bindingWith(t, "stale-n1", "")), 201)
		var got corev1.Pod
		admin(t, "GET", path, nil).into(t, &got)
		if got.Spec.NodeName != "stale-n1" || got.Labels["written"] != "behind" {
			t.Fatalf("%s: node %q, labels %v; want bound to stale-n1 with the other writer's label", name, got.Spec.NodeName, got.Labels)
		}
	}
	t.Logf("the watch cache was behind etcd in %d of 60 bindings", behind)

	// The retry itself, whatever the cache's timing: a binding attempted on
	// a stale copy fails with the pod as its transaction found it, and the
	// next attempt on that pod succeeds.
	name := "stale-direct"
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod(name).obj()), 201)
	stale, rev := labelBehind(ctx, t, k, ns, name)
	b := bindingWith(t, "stale-n1", "")
	_, err := testAPI.bind(ctx, k, ns, name, b, stale.DeepCopy())
	var moved *podMovedError
	if !errors.As(err, &moved) || moved.pod == nil {
		t.Fatalf("binding on a stale pod: %v, want a podMovedError with the current pod", err)
	}
	if got, _ := revisionOf(moved.pod); got != rev || moved.pod.Labels["written"] != "behind" {
		t.Fatalf("the failed transaction returned revision %d labels %v, want %d with the other writer's label", got, moved.pod.Labels, rev)
	}
	if _, err := testAPI.bind(ctx, k, ns, name, b, moved.pod); err != nil {
		t.Fatalf("binding on the returned pod: %v", err)
	}
	var got corev1.Pod
	admin(t, "GET", "/api/v1/namespaces/"+ns+"/pods/"+name, nil).into(t, &got)
	if got.Spec.NodeName != "stale-n1" || got.Labels["written"] != "behind" {
		t.Fatalf("%s: node %q, labels %v; want bound to stale-n1 with the other writer's label", name, got.Spec.NodeName, got.Labels)
	}
}

// labelBehind sets the label written=behind on pod ns/name in etcd,
// behind the API server's back, and returns the pod as it was and the
// revision of the write.
func labelBehind(ctx context.Context, t *testing.T, k *kind, ns, name string) (*corev1.Pod, int64) {
	t.Helper()
	kv, err := testStore.Get(ctx, k.storageKey(ns, name))
	if err != nil {
		t.Fatal(err)
	}
	obj, err := decodeStored(k, kv.Value, kv.ModRevision)
	if err != nil {
		t.Fatal(err)
	}
	before := obj.(*corev1.Pod)
	newer := before.DeepCopy()
	newer.Labels = map[string]string{"written": "behind"}
	data, err := encodeForStorage(k, newer)
	if err != nil {
		t.Fatal(err)
	}
	rev, err := testStore.Txn(ctx, []storage.Op{storage.Update(k.storageKey(ns, name), data, kv.ModRevision)})
	if err != nil {
		t.Fatal(err)
	}
	return before, rev
}
