package dashboard_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"sigs.k8s.io/yaml"
)

// The page's header counts like with like: devices (the top-level
// instances of the slices) by state, which add up to the devices, and
// the partitions claims hold. It used to add the free cells of every
// partition group to the devices' count, so that two idle GPUs of the
// example driver read "2 devices · 9 free". view.js's render runs here
// in the browser on fixed objects, without a cluster's state.
func TestDashboardSummaryCounts(t *testing.T) {
	b := newBrowser(t)
	b.do(t, "open the dashboard", chromedp.Navigate(up.URL+"/dashboard/"))
	b.waitFor(t, "#login")

	// The example driver's built-in model (the demo's GPUs), idle.
	data, err := os.ReadFile(filepath.Join("..", "..", "examples", "gpu-driver", "gpudriver", "default-model.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var model map[string]any
	if err := yaml.Unmarshal(data, &model); err != nil {
		t.Fatal(err)
	}
	idle := map[string]any{
		"nodes":  []any{fxNode("n1")},
		"slices": []any{fxSlice("n1", model["partitionable"])},
	}
	got := renderSummary(t, b, idle)
	want := map[string]string{"nodes": "1", "devices": "2", "free": "2", "held": "0", "partitioned": "0",
		"unhealthy": "0", "partitions-held": "0", "pending": "0"}
	if !reflect.DeepEqual(got.counts, want) {
		t.Errorf("idle example GPUs: summary %v (%q), want %v", got.counts, got.text, want)
	}
	if !strings.HasPrefix(got.driver, "2 devices: 2 free · 0 held · 0 partitioned · 0 unhealthy; 0 partitions held") {
		t.Errorf("idle example GPUs: driver line %q", got.driver)
	}

	// Four GPUs: gpu-0 held whole, gpu-1 split in quarters of which two
	// are held (its halves unavailable, two quarters free), gpu-2
	// unhealthy, gpu-3 free; and a second node's whole free GPU.
	parts := func(prefix string, n int) []any {
		var out []any
		for i := range n {
			out = append(out, map[string]any{"name": prefix + string(rune('0'+i))})
		}
		return out
	}
	busy := map[string]any{
		"nodes": []any{fxNode("n1"), fxNode("n2")},
		"slices": []any{
			fxSlice("n1", map[string]any{"resourceInstances": []any{
				map[string]any{"name": "gpu-0"},
				map[string]any{"name": "gpu-1", "partitions": []any{
					map[string]any{"name": "halves", "resourceInstances": parts("h", 2)},
					map[string]any{"name": "quarters", "resourceInstances": parts("q", 4)},
				}},
				map[string]any{"name": "gpu-2", "health": "Unhealthy"},
				map[string]any{"name": "gpu-3"},
			}}),
			fxSlice("n2", map[string]any{"resourceInstances": []any{map[string]any{"name": "gpu-0"}}}),
		},
		"claims": []any{fxClaim("c-whole", "n1", "gpu-0"), fxClaim("c-q1", "n1", "gpu-1/quarters/q1"), fxClaim("c-q2", "n1", "gpu-1/quarters/q2")},
		"pods":   []any{map[string]any{"metadata": map[string]any{"name": "waits", "namespace": "ns"}, "spec": map[string]any{}}},
	}
	got = renderSummary(t, b, busy)
	want = map[string]string{"nodes": "2", "devices": "5", "free": "2", "held": "1", "partitioned": "1",
		"unhealthy": "1", "partitions-held": "2", "pending": "1"}
	if !reflect.DeepEqual(got.counts, want) {
		t.Errorf("busy GPUs: summary %v (%q), want %v", got.counts, got.text, want)
	}
	if !strings.HasPrefix(got.driver, "4 devices: 1 free · 1 held · 1 partitioned · 1 unhealthy; 2 partitions held") {
		t.Errorf("busy GPUs: node n1's driver line %q", got.driver)
	}
	if !strings.Contains(got.text, "1 pending pod") || strings.Contains(got.text, "1 pending pods") {
		t.Errorf("busy GPUs: header %q, want \"1 pending pod\" (singular)", got.text)
	}
	// One of each: singular nouns.
	one := map[string]any{
		"nodes":  []any{fxNode("n1")},
		"slices": []any{fxSlice("n1", map[string]any{"resourceInstances": []any{map[string]any{"name": "gpu-0"}}})},
	}
	got = renderSummary(t, b, one)
	if !strings.HasPrefix(got.driver, "1 device: 1 free · 0 held · 0 partitioned · 0 unhealthy; 0 partitions held") {
		t.Errorf("one GPU: driver line %q", got.driver)
	}
	if !strings.Contains(got.text, "1 node") || strings.Contains(got.text, "1 nodes") || strings.Contains(got.text, "1 devices") {
		t.Errorf("one GPU: header %q, want singular nouns", got.text)
	}
	b.noConsoleErrors(t)
}

type summary struct {
	counts       map[string]string // data-summary -> the number shown
	text, driver string            // the header's text; the first driver line
}

// renderSummary calls view.js's render with objects by kind and reads the
// header.
func renderSummary(t *testing.T, b *browser, objects map[string]any) summary {
	t.Helper()
	js, err := json.Marshal(objects)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	out, err := chromedp.Run(ctx, chromedp.Evaluate[map[string]any](`(async () => {
  const view = await import('/dashboard/assets/view.js');
  const objects = `+string(js)+`;
  view.render({ items: (k) => objects[k] || [], explanations: new Map(), explainedAt: null, explainError: '' });
  const counts = {};
  for (const e of document.querySelectorAll('#summary [data-summary]')) counts[e.dataset.summary] = e.querySelector('strong').textContent;
  return { counts, text: document.getElementById('summary').textContent,
    driver: document.querySelector('[data-driver-summary]')?.textContent ?? '' };
})()`, chromedp.EvalAwaitPromise))
	if err != nil {
		t.Fatalf("render in the browser: %v", err)
	}
	s := summary{counts: map[string]string{}}
	if m, ok := out["counts"].(map[string]any); ok {
		for k, v := range m {
			s.counts[k], _ = v.(string)
		}
	}
	s.text, _ = out["text"].(string)
	s.driver, _ = out["driver"].(string)
	return s
}

func fxNode(name string) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name},
		"status": map[string]any{"conditions": []any{map[string]any{"type": "Ready", "status": "True"}}}}
}

func fxSlice(node string, partitionable any) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": node + "-gpus"},
		"spec": map[string]any{"nodeName": node, "driverName": driver, "partitionable": partitionable}}
}

func fxClaim(name, node, id string) map[string]any {
	return map[string]any{"metadata": map[string]any{"name": name, "namespace": "ns"},
		"status": map[string]any{"allocation": map[string]any{"resourceHandles": []any{map[string]any{
			"driverName": driver,
			"structuredData": map[string]any{"nodeName": node,
				"partitionable": map[string]any{"instances": []any{map[string]any{"id": id}}}},
		}}}}}
}
