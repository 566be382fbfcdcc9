package resourceclaim

import (
	"context"
	"fmt"
	"log/slog"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// BenchmarkCreateClaimFromTemplate is the controller's share of making a
// pod's claim from its template (claimFor: the template from the cache,
// the claim built, created through the client of the template's version,
// and the claim's watch event decoded into the informer's cache), for a
// v1alpha2 template against a v1 one. The API server is the package's
// cluster, another process: its share is internal/apiserver's
// BenchmarkWrite. The timer stops once the cache holds every claim.
func BenchmarkCreateClaimFromTemplate(b *testing.B) {
	for _, form := range []string{"seed", "v1"} {
		b.Run(form, func(b *testing.B) {
			e := newEnv(b)
			if form == "v1" {
				e.createTemplateV1("tmpl")
			} else {
				e.createTemplate("tmpl")
			}
			// Without the client's rate limit, which would set the pace.
			rc := e.c.RESTConfig()
			rc.QPS = -1
			c, err := client.NewForConfig(rc)
			if err != nil {
				b.Fatal(err)
			}
			f := client.NewFactory(c, 0)
			ctrl, err := New(c, f, Options{APITimeout: 10 * time.Second, Registry: prometheus.NewRegistry(),
				Logger: slog.New(slog.DiscardHandler)})
			if err != nil {
				b.Fatal(err)
			}
			// Each claim the informer adds signals added, so the wait for
			// the cache below is on events, not on a polling interval.
			added := make(chan struct{}, 1)
			signal := cache.ResourceEventHandlerFuncs{AddFunc: func(any) {
				select {
				case added <- struct{}{}:
				default:
				}
			}}
			var herr error
			if form == "v1" {
				_, herr = ctrl.claimsV1.AddEventHandler(signal)
			} else {
				_, herr = ctrl.claims.AddEventHandler(signal)
			}
			if herr != nil {
				b.Fatal(herr)
			}
			ctx, cancel := context.WithCancel(e.ctx)
			f.Start(ctx)
			b.Cleanup(func() { cancel(); f.Shutdown() })
			if err := f.WaitForCacheSync(e.ctx); err != nil {
				b.Fatal(err)
			}
			cached := func() int {
				if form == "v1" {
					cs, _ := ctrl.claimsV1.Lister().ListNamespace(e.ns, nil)
					return len(cs)
				}
				cs, _ := ctrl.claims.Lister().ListNamespace(e.ns, nil)
				return len(cs)
			}
			e.eventually("the template is cached", func() bool {
				_, err := ctrl.template(e.ctx, e.ns, "tmpl")
				return err == nil
			})
			pods := make([]*corev1.Pod, b.N)
			for i := range pods {
				pods[i] = makePod(fmt.Sprintf("p-%d", i)).template("gpu", "tmpl").obj()
				pods[i].Namespace, pods[i].UID = e.ns, types.UID(fmt.Sprintf("uid-%s-%d", e.ns, i))
			}
			b.ReportAllocs()
			b.ResetTimer()
			for _, p := range pods {
				if _, err := ctrl.claimFor(e.ctx, p, p.Spec.ResourceClaims[0]); err != nil {
					b.Fatal(err)
				}
			}
			for cached() < b.N {
				select {
				case <-added:
				case <-time.After(pollTimeout):
					b.Fatalf("the cache holds %d of %d claims after %s", cached(), b.N, pollTimeout)
				}
			}
		})
	}
}
