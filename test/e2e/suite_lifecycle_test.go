package e2e

import (
	"slices"
	"strings"
	"testing"
)

// podWatchFormat prints one line per pod event: name and stage label.
const podWatchFormat = `jsonpath={.metadata.name} stage={.metadata.labels.stage}{"\n"}`

func stepWatch(t *testing.T, c *cluster) {
	w := c.kubectlWatch(t, "get", "pods", "-n", ns, "-w", "-o", podWatchFormat)
	_, initial, err := w.Stdout.WaitFor(0, watchTimeout, func(s string) bool { return s == "web stage=" })
	if err != nil {
		t.Fatalf("kubectl get pods -w: initial list has no line %q: %v\nstdout:\n%s\nstderr:\n%s", "web stage=", err, w.Stdout, w.Stderr)
	}
	c.kubectl(t, "label", "pod", "web", "-n", ns, "stage=watched")
	_, seen, err := w.Stdout.WaitFor(initial+1, watchTimeout, func(s string) bool { return s == "web stage=watched" })
	if err != nil {
		t.Fatalf("kubectl get pods -w did not show the label change (want line %q): %v\nstdout:\n%s\nstderr:\n%s",
			"web stage=watched", err, w.Stdout, w.Stderr)
	}
	c.kubectl(t, "run", "late", "-n", ns, "--image=busybox", "--restart=Never", "--labels=stage=late")
	if _, _, err := w.Stdout.WaitFor(seen+1, watchTimeout, func(s string) bool { return s == "late stage=late" }); err != nil {
		t.Fatalf("kubectl get pods -w did not show the pod made by kubectl run (want line %q): %v\nstdout:\n%s\nstderr:\n%s",
			"late stage=late", err, w.Stdout, w.Stderr)
	}
	if w.Exited() {
		t.Errorf("kubectl get pods -w exited while watching: %v\nstderr:\n%s", w.Err(), w.Stderr)
	}
	w.Kill()
}

func stepDelete(t *testing.T, c *cluster) {
	requireDeleted(t, "kubectl delete pod worker", c.kubectl(t, "delete", "pod", "worker", "-n", ns), `pod "worker" deleted`)
	stderr := c.kubectlExpectFail(t, "get", "pod", "worker", "-n", ns)
	requireContains(t, "kubectl get of a deleted pod: stderr", stderr, `Error from server (NotFound): pods "worker" not found`)

	out := c.kubectl(t, "delete", "pods", "-n", ns, "-l", "lifetime=temporary")
	requireDeleted(t, "kubectl delete pods -l lifetime=temporary", out, `pod "temp-1" deleted`, `pod "temp-2" deleted`)
	if out := c.kubectl(t, "get", "pods", "-n", ns, "-l", "lifetime=temporary", "-o", "name"); out != "" {
		t.Errorf("kubectl get pods -l lifetime=temporary after deleting them printed %q, want nothing", out)
	}

	requireDeleted(t, "kubectl delete -f", c.kubectl(t, "delete", "-f", "testdata/apply.yaml"),
		`pod "applied" deleted`, `cardparameters.dra.example.com "applied-params" deleted`)
	stderr = c.kubectlExpectFail(t, "get", "cardparameters", "applied-params", "-n", ns)
	requireContains(t, "kubectl get of a deleted custom resource: stderr", stderr, `"applied-params" not found`)
}

// requireDeleted is requireLines for kubectl delete's output, whose form
// depends on kubectl's version: 1.32 prints `pod "worker" deleted`, 1.37
// (hack/tools/kubectl's) `pod "worker" deleted from user-namespace
// namespace`. want lists the short form; either is accepted. The suite runs
// whichever kubectl is on PATH, else the one hack/tools/kubectl builds.
func requireDeleted(t *testing.T, what, out string, want ...string) {
	t.Helper()
	suffix := " from " + ns + " namespace"
	got := strings.Split(strings.TrimSpace(out), "\n")
	for i, l := range got {
		if short, ok := strings.CutSuffix(l, suffix); ok && strings.HasSuffix(short, " deleted") {
			got[i] = short
		}
	}
	slices.Sort(got)
	want = slices.Sorted(slices.Values(want))
	if !slices.Equal(got, want) {
		t.Errorf("%s printed:\n%s\nwant (any order, each line maybe followed by %q):\n%s",
			what, strings.TrimSpace(out), suffix, strings.Join(want, "\n"))
	}
}

func stepStrictDecoding(t *testing.T, c *cluster) {
	cases := []struct {
		name string
		args []string
		want []string // in kubectl's stderr
	}{
		{"create pod", []string{"create", "-f", "testdata/bad-pod.yaml"},
			[]string{`unknown field "spec.containers[0].bogusField"`}},
		{"apply pod", []string{"apply", "-f", "testdata/bad-pod.yaml"},
			[]string{`unknown field "spec.containers[0].bogusField"`}},
		{"replace pod", []string{"replace", "-f", "testdata/bad-web.yaml"},
			[]string{`unknown field "spec.containers[0].imagePullPolice"`}},
		{"patch pod", []string{"patch", "pod", "web", "-n", ns, "-p", `{"spec":{"bogus":1}}`},
			[]string{`unknown field "spec.bogus"`}},
		{"create custom resource", []string{"create", "-f", "testdata/bad-params.yaml"},
			[]string{"spec.colour", "unknown field"}},
	}
	webRV := c.jsonpath(t, "{.metadata.resourceVersion}", "pod", "web", "-n", ns)
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			stderr := c.kubectlExpectFail(t, tc.args...)
			requireContains(t, "kubectl "+strings.Join(tc.args, " ")+": stderr", stderr, tc.want...)
		})
	}
	for _, args := range [][]string{{"pod", "bad-pod", "-n", ns}, {"cardparameters", "bad-params", "-n", ns}} {
		stderr := c.kubectlExpectFail(t, append([]string{"get"}, args...)...)
		requireContains(t, "kubectl get "+strings.Join(args, " ")+" after a rejected create: stderr", stderr, "not found")
	}
	if got := c.jsonpath(t, "{.metadata.resourceVersion}", "pod", "web", "-n", ns); got != webRV {
		t.Errorf("pod web: resourceVersion %s after the rejected replace and patch, want %s (unchanged)", got, webRV)
	}
}

// deletedInSuite are objects the suite deleted; they must stay deleted.
var deletedInSuite = [][]string{
	{"pod", "worker", "-n", ns}, {"pod", "temp-1", "-n", ns}, {"pod", "temp-2", "-n", ns},
	{"pod", "applied", "-n", ns}, {"cardparameters", "applied-params", "-n", ns},
}

// createdInSuite are objects the restart check must find, besides everything
// else listed before the restart.
var createdInSuite = []objectID{
	{"Namespace", "", "default"}, {"Namespace", "", "kube-system"}, {"Namespace", "", ns},
	{"Node", "", "worker-1"},
	{"NodeResourceSlice", "", "worker-1-cards"},
	{"CustomResourceDefinition", "", "cardparameters.dra.example.com"},
	{"CardParameters", ns, "my-parameters"},
	{"ResourceClaimParameters", ns, "my-parameters-generated"},
	{"ResourceClass", "", "acme-cards"},
	{"ResourceClaim", ns, "two-cards"},
	{"Pod", ns, "card-user"}, {"Pod", ns, "web"}, {"Pod", ns, "late"},
}

func stepRestart(t *testing.T, c *cluster) {
	before := c.snapshot(t)
	for _, id := range createdInSuite {
		if _, ok := before[id]; !ok {
			t.Errorf("before restart: kubectl get %s lists no %s", snapshotKinds, id)
		}
	}
	c.restart(t)
	after := c.snapshot(t)
	requireSameObjects(t, before, after)
	for _, args := range deletedInSuite {
		stderr := c.kubectlExpectFail(t, append([]string{"get"}, args...)...)
		requireContains(t, "after restart: kubectl get "+strings.Join(args, " ")+": stderr", stderr, "not found")
	}
	requireFields(t, "after restart: noderesourceslice worker-1-cards", c.getYAML(t, "noderesourceslice", "worker-1-cards"), map[string]any{
		"spec.partitionable.resourceInstances.1.partitions.2.resourceInstances.1.partitions.1.resourceInstances.1.name": "quarter-1",
	})
	got := c.jsonpath(t, "{.metadata.labels.tier} {.metadata.labels.x} {.metadata.labels.stage}", "pod", "web", "-n", ns)
	if got != "frontend y watched" {
		t.Errorf("after restart: pod web labels tier x stage = %q, want %q", got, "frontend y watched")
	}
	// allot's own client finds the restarted server through the kubeconfig
	// that allot up remembered.
	requireLines(t, "after restart: allot get pods -o name", c.allot(t, "get", "pods", "-n", ns, "-o", "name"),
		"pod/card-user", "pod/web", "pod/late")
	requireLines(t, "after restart: kubectl label pod", c.kubectl(t, "label", "pod", "web", "-n", ns, "restarted=yes"), "pod/web labeled")
}
