package apiserver

import (
	"context"
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
