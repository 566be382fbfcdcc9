package dashboard_test

import (
	"reflect"
	"testing"

	"github.com/chromedp/chromedp"
)

// resource.k8s.io/v1 beside the seed kinds: a node's v1 pool is drawn in
// its card with its devices and shared counters, a pool not local to one
// node in its own section, and v1 claims hold devices of both (a seed
// device through its v1 name: pool = node, "/" written "--"). The header
// counts v1 devices and the claims holding them like seed ones.
func TestDashboardSummaryV1(t *testing.T) {
	b := newBrowser(t)
	b.do(t, "open the dashboard", chromedp.Navigate(up.URL+"/dashboard/"))
	b.waitFor(t, "#login")

	const v1Driver = "v1.example.com"
	dev := func(name, counterSet, mem string, extra map[string]any) map[string]any {
		d := map[string]any{"name": name}
		if counterSet != "" {
			d["consumesCounters"] = []any{map[string]any{"counterSet": counterSet,
				"counters": map[string]any{"memory": map[string]any{"value": mem}}}}
		}
		for k, v := range extra {
			d[k] = v
		}
		return d
	}
	objects := map[string]any{
		"nodes": []any{fxNode("n1")},
		"slices": []any{fxSlice("n1", map[string]any{"resourceInstances": []any{
			map[string]any{"name": "gpu-0"},
			map[string]any{"name": "gpu-1", "partitions": []any{
				map[string]any{"name": "halves", "resourceInstances": []any{map[string]any{"name": "h0"}, map[string]any{"name": "h1"}}},
			}},
		}})},
		"slicesV1": []any{
			fxSliceV1("n1-devices", v1Driver, "n1-pool", "n1", 2, map[string]any{"devices": []any{
				dev("d0", "mem", "40Gi", nil), // the whole device
				dev("d1", "mem", "20Gi", nil), // a half
				dev("d2", "mem", "20Gi", nil), // the other half
				dev("d3", "", "", map[string]any{"taints": []any{map[string]any{"key": "broken", "effect": "NoSchedule"}}}),
			}}),
			fxSliceV1("n1-counters", v1Driver, "n1-pool", "n1", 2, map[string]any{"sharedCounters": []any{
				map[string]any{"name": "mem", "counters": map[string]any{"memory": map[string]any{"value": "40Gi"}}},
			}}),
			fxSliceV1("fabric", "net.example.com", "fabric", "", 1, map[string]any{"allNodes": true,
				"devices": []any{dev("nic0", "", "", nil), dev("nic1", "", "", nil)}}),
		},
		"claimsV1": []any{
			fxClaimV1("c-seed", driver, "n1", "gpu-1--halves--h0"),
			fxClaimV1("c-half", v1Driver, "n1-pool", "d1"),
			fxClaimV1("c-nic", "net.example.com", "fabric", "nic0"),
		},
	}
	got := renderSummary(t, b, objects)
	// Devices: the seed GPUs (gpu-0 free, gpu-1 partitioned), the node's
	// pool (d0 partitioned: its counters are half used; d1 held; d2 free;
	// d3 tainted), the fabric (nic0 held, nic1 free).
	want := map[string]string{"nodes": "1", "devices": "8", "free": "3", "held": "2", "partitioned": "2",
		"unhealthy": "1", "partitions-held": "1", "pending": "0"}
	if !reflect.DeepEqual(got.counts, want) {
		t.Errorf("summary %v (%q), want %v", got.counts, got.text, want)
	}
	states := eval[map[string]any](t, b, `(() => {
  const out = {};
  for (const e of document.querySelectorAll('[data-pool] [data-device]')) {
    out[e.closest('[data-pool]').dataset.pool + '/' + e.dataset.device] = e.dataset.state;
  }
  for (const e of document.querySelectorAll('[data-node="n1"] [data-instance]')) out[e.dataset.instance] = e.dataset.state;
  for (const e of document.querySelectorAll('[data-counter]')) out['counter ' + e.dataset.counter] = e.dataset.used + ' of ' + e.dataset.total;
  out.local = [...document.querySelectorAll('[data-node="n1"] [data-pool]')].map((e) => e.dataset.pool).join(' ');
  out.shared = [...document.querySelectorAll('#pools [data-pool]')].map((e) => e.dataset.pool).join(' ');
  out.sharedHidden = document.getElementById('pools-section').hidden;
  out.holders = [...document.querySelectorAll('[data-claim]')].map((e) => e.dataset.claim).sort().join(' ');
  return out;
})()`)
	wantStates := map[string]any{
		"n1-pool/d0": "partitioned", "n1-pool/d1": "held", "n1-pool/d2": "free", "n1-pool/d3": "unhealthy",
		"fabric/nic0": "held", "fabric/nic1": "free",
		"gpu-0": "free", "gpu-1": "partitioned", "gpu-1/halves/h0": "held", "gpu-1/halves/h1": "free",
		"counter mem/memory": "20Gi of 40Gi",
		"local":              "n1-pool", "shared": "fabric", "sharedHidden": false,
		"holders": "ns/c-half ns/c-nic ns/c-seed",
	}
	if !reflect.DeepEqual(states, wantStates) {
		t.Errorf("drawn %v,\nwant %v", states, wantStates)
	}

	// Without v1 objects the pools' section is hidden.
	renderSummary(t, b, map[string]any{"nodes": []any{fxNode("n1")}})
	if !eval[bool](t, b, `document.getElementById('pools-section').hidden`) {
		t.Error("the section of pools not local to one node is shown without such pools")
	}
	b.noConsoleErrors(t)
}

func fxSliceV1(name, driver, pool, node string, count int, spec map[string]any) map[string]any {
	s := map[string]any{"driver": driver, "pool": map[string]any{"name": pool, "generation": 1, "resourceSliceCount": count}}
	if node != "" {
		s["nodeName"] = node
	}
	for k, v := range spec {
		s[k] = v
	}
	return map[string]any{"metadata": map[string]any{"name": name}, "spec": s}
}

func fxClaimV1(name, driver, pool, device string) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "namespace": "ns"},
		"status": map[string]any{
			"allocation": map[string]any{"devices": map[string]any{"results": []any{
				map[string]any{"request": "r", "driver": driver, "pool": pool, "device": device}}}},
			"reservedFor": []any{map[string]any{"resource": "pods", "name": "p-" + name, "uid": "u"}},
		}}
}
