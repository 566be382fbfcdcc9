package simulate

import (
	"context"
	"strings"
	"testing"
)

// Node checks and resources come from the scheduler's plugins, not from a
// copy of them: cpu is counted, taints are honoured, and nodes without
// status are simulated as ready with kubelet's pod capacity.
func TestSchedulesThroughFramework(t *testing.T) {
	const nodes = `
apiVersion: v1
kind: Node
metadata: {name: small}
status: {allocatable: {cpu: "2"}}
---
apiVersion: v1
kind: Node
metadata: {name: tainted}
spec: {taints: [{key: dedicated, value: x, effect: NoSchedule}]}
status: {allocatable: {cpu: "8"}}
---
apiVersion: v1
kind: Node
metadata: {name: not-ready}
status:
  conditions: [{type: Ready, status: "False"}]
  allocatable: {cpu: "8", pods: "10"}
`
	pod := func(name, cpu string) string {
		return "---\napiVersion: v1\nkind: Pod\nmetadata: {name: " + name + ", namespace: default}\n" +
			"spec: {containers: [{name: app, image: busybox, resources: {requests: {cpu: \"" + cpu + "\"}}}]}\n"
	}
	for name, tc := range map[string]struct {
		input string
		want  []string
	}{
		"cpu is counted": {input: nodes + pod("a", "1500m") + pod("b", "1500m"), want: []string{
			"pod default/a: scheduled to small",
			"pod default/b: not scheduled (Unschedulable)",
			"small: NodeResourcesFit: Insufficient cpu",
			"tainted: TaintToleration: node(s) had untolerated taint {dedicated: x}",
			"not-ready: NodeReady: node(s) were not ready",
		}},
		"no claims fits a ready node": {input: nodes + pod("c", "100m"), want: []string{"pod default/c: scheduled to small"}},
	} {
		t.Run(name, func(t *testing.T) {
			out, err := Run(context.Background(), decodeAll(t, tc.input), Options{})
			if err != nil {
				t.Fatal(err)
			}
			got := describe(out)
			for _, w := range tc.want {
				if !strings.Contains(got, w) {
					t.Errorf("output lacks %q:\n%s", w, got)
				}
			}
		})
	}
}
