package dashboard_test

import (
	"maps"
	"reflect"
	"slices"
	"strings"
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

// The node agent writes the health of the devices of v1 pools into the
// status of the pods holding them (allocatedResourcesStatus, resource
// "DRIVER/POOL/DEVICE"): a held device a pod it is reserved for reports
// Unhealthy is drawn held, unhealthy and counted held, as a held seed
// instance its driver reports unhealthy is. Unknown and Healthy change
// nothing, nor does a report by a pod the claim is not reserved for (an
// earlier pod of the same name), nor one on a device nobody holds.
func TestDashboardSummaryV1Health(t *testing.T) {
	b := newBrowser(t)
	b.do(t, "open the dashboard", chromedp.Navigate(up.URL+"/dashboard/"))
	b.waitFor(t, "#login")

	const v1Driver = "v1.example.com"
	devices := []any{}
	for _, n := range []string{"d0", "d1", "d2", "d3", "d4", "d5"} {
		devices = append(devices, map[string]any{"name": n})
	}
	devices = append(devices, map[string]any{"name": "d6",
		"taints": []any{map[string]any{"key": "broken", "effect": "NoExecute"}}})
	claim := func(name, device, podUID string) map[string]any {
		c := fxClaimV1(name, v1Driver, "n1-pool", device)
		c["status"].(map[string]any)["reservedFor"] = []any{map[string]any{"resource": "pods", "name": "p-" + name, "uid": podUID}}
		return c
	}
	id := func(device string) string { return v1Driver + "/n1-pool/" + device }
	objects := map[string]any{
		"nodes":    []any{fxNode("n1")},
		"slicesV1": []any{fxSliceV1("n1-devices", v1Driver, "n1-pool", "n1", 1, map[string]any{"devices": devices})},
		"claimsV1": []any{
			claim("c0", "d0", "u0"), claim("c1", "d1", "u1"), claim("c2", "d2", "u2"),
			claim("c3", "d3", "u3"), claim("c6", "d6", "u6"),
		},
		"pods": []any{
			// d0: Unhealthy, in a request's entry beside a healthy device
			// of another driver.
			fxPodReporting("p-c0", "u0", "claim:gpu/r", map[string]string{"other.example.com/p/x": "Healthy", id("d0"): "Unhealthy"}),
			fxPodReporting("p-c1", "u1", "claim:gpu", map[string]string{id("d1"): "Unknown"}),
			fxPodReporting("p-c2", "u2", "claim:gpu", map[string]string{id("d2"): "Healthy"}),
			// d3: an earlier pod of the holder's name reports it.
			fxPodReporting("p-c3", "u3-before", "claim:gpu", map[string]string{id("d3"): "Unhealthy"}),
			// d4: nobody holds it; d5: a device-plugin entry, not a claim's.
			fxPodReporting("p-old", "u-old", "claim:gpu", map[string]string{id("d4"): "Unhealthy"}),
			fxPodReporting("p-dp", "u-dp", "example.com/fpga", map[string]string{id("d5"): "Unhealthy"}),
			// d6: tainted and reported.
			fxPodReporting("p-c6", "u6", "claim:gpu", map[string]string{id("d6"): "Unhealthy"}),
		},
	}
	got := renderSummary(t, b, objects)
	want := map[string]string{"nodes": "1", "devices": "7", "free": "2", "held": "5", "partitioned": "0",
		"unhealthy": "0", "partitions-held": "0", "pending": "0"}
	if !reflect.DeepEqual(got.counts, want) {
		t.Errorf("summary %v (%q), want %v", got.counts, got.text, want)
	}
	drawn := eval[map[string]any](t, b, `(() => {
  const out = {};
  for (const e of document.querySelectorAll('[data-pool="n1-pool"] [data-device]')) {
    out[e.dataset.device] = [e.dataset.state, e.dataset.health, e.querySelector('.inst-state').textContent,
      e.dataset.reportedUnhealthyBy || ''].join(' | ');
  }
  return out;
})()`)
	wantDrawn := map[string]any{
		"d0": "held | unhealthy | held, unhealthy | ns/p-c0",
		"d1": "held | healthy | held | ",
		"d2": "held | healthy | held | ",
		"d3": "held | healthy | held | ",
		"d4": "free | healthy | free | ",
		"d5": "free | healthy | free | ",
		"d6": "held | unhealthy | held, tainted, unhealthy | ns/p-c6",
	}
	if !reflect.DeepEqual(drawn, wantDrawn) {
		t.Errorf("drawn %v,\nwant %v", drawn, wantDrawn)
	}
	if s := eval[string](t, b, `document.querySelector('[data-pool-summary="n1-pool"]').textContent`); !strings.HasPrefix(s, "7 devices: 2 free · 5 held · 0 partitioned · 0 unhealthy") {
		t.Errorf("pool line %q", s)
	}
	b.noConsoleErrors(t)
}

// A driver's status.devices on a held v1 device is judged as `allot
// explain` judges it: Ready=False or a True binding failure condition is
// failing (drawn unhealthy, still counted held), a binding condition not
// yet True is binding, Ready=True is ready; the conditions are in the
// device's tooltip. A status for another device or share says nothing.
func TestDashboardSummaryV1DeviceStatus(t *testing.T) {
	b := newBrowser(t)
	b.do(t, "open the dashboard", chromedp.Navigate(up.URL+"/dashboard/"))
	b.waitFor(t, "#login")

	const v1Driver = "v1.example.com"
	devices := []any{}
	for _, n := range []string{"d0", "d1", "d2", "d3", "d4", "d5"} {
		devices = append(devices, map[string]any{"name": n})
	}
	cond := func(typ, status string) map[string]any {
		return map[string]any{"type": typ, "status": status, "reason": "R" + typ}
	}
	claim := func(name, device string, result map[string]any, conds ...map[string]any) map[string]any {
		c := fxClaimV1(name, v1Driver, "n1-pool", device)
		st := c["status"].(map[string]any)
		r := st["allocation"].(map[string]any)["devices"].(map[string]any)["results"].([]any)[0].(map[string]any)
		for k, v := range result {
			r[k] = v
		}
		if conds != nil {
			entry := map[string]any{"driver": v1Driver, "pool": "n1-pool", "device": device, "conditions": conds}
			if name == "c5" {
				entry["device"] = "d4" // a status of another device
			}
			st["devices"] = []any{entry}
		}
		return c
	}
	binding := map[string]any{"bindingConditions": []any{"Attached"}, "bindingFailureConditions": []any{"AttachFailed"}}
	objects := map[string]any{
		"nodes":    []any{fxNode("n1")},
		"slicesV1": []any{fxSliceV1("n1-devices", v1Driver, "n1-pool", "n1", 1, map[string]any{"devices": devices})},
		"claimsV1": []any{
			claim("c0", "d0", nil, cond("Ready", "False")),
			claim("c1", "d1", nil, cond("Ready", "True")),
			claim("c2", "d2", binding, cond("Attached", "False")),
			claim("c3", "d3", binding, cond("Attached", "False"), cond("AttachFailed", "True")),
			claim("c4", "d4", binding, cond("Attached", "True"), cond("Ready", "True")),
			claim("c5", "d5", nil, cond("Ready", "False")),
		},
	}
	got := renderSummary(t, b, objects)
	want := map[string]string{"nodes": "1", "devices": "6", "free": "0", "held": "6", "partitioned": "0",
		"unhealthy": "0", "partitions-held": "0", "pending": "0"}
	if !reflect.DeepEqual(got.counts, want) {
		t.Errorf("summary %v (%q), want %v", got.counts, got.text, want)
	}
	drawn := eval[map[string]any](t, b, `(() => {
  const out = {};
  for (const e of document.querySelectorAll('[data-pool="n1-pool"] [data-device]')) {
    out[e.dataset.device] = [e.dataset.state, e.dataset.health, e.dataset.deviceStatus || '',
      e.querySelector('.inst-state').textContent, e.title].join(' | ');
  }
  return out;
})()`)
	wantDrawn := map[string]any{
		"d0": "held | unhealthy | failing | held, failing | ns/c0: Ready=False (RReady)",
		"d1": "held | healthy | ready | held | ns/c1: Ready=True (RReady)",
		"d2": "held | healthy | binding | held, binding | ns/c2: Attached=False (RAttached)",
		"d3": "held | unhealthy | failing | held, failing | ns/c3: Attached=False (RAttached)\nns/c3: AttachFailed=True (RAttachFailed)",
		"d4": "held | healthy | ready | held | ns/c4: Attached=True (RAttached)\nns/c4: Ready=True (RReady)",
		"d5": "held | healthy |  | held | ",
	}
	if !reflect.DeepEqual(drawn, wantDrawn) {
		t.Errorf("drawn %v,\nwant %v", drawn, wantDrawn)
	}
	b.noConsoleErrors(t)
}

// fxPodReporting is a running pod whose one container's status reports
// health (resource ID -> Healthy, Unhealthy or Unknown) under entry.
func fxPodReporting(name, uid, entry string, health map[string]string) map[string]any {
	var resources []any
	for _, id := range slices.Sorted(maps.Keys(health)) {
		resources = append(resources, map[string]any{"resourceID": id, "health": health[id]})
	}
	return map[string]any{
		"metadata": map[string]any{"name": name, "namespace": "ns", "uid": uid},
		"spec":     map[string]any{"nodeName": "n1", "containers": []any{map[string]any{"name": "c"}}},
		"status": map[string]any{"phase": "Running", "containerStatuses": []any{map[string]any{
			"name": "c", "allocatedResourcesStatus": []any{map[string]any{"name": entry, "resources": resources}},
		}}},
	}
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
