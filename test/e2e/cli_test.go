package e2e

import (
	"strings"
	"testing"
)

// TestCLI drives a cluster with allot's own client commands (apply, get,
// describe, delete, logs), without --kubeconfig: they must find the
// kubeconfig of the last `allot up`, also after a restart. kubectl manages
// the same objects alongside.
func TestCLI(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t)

	// The CRD file comes last: apply orders namespaces and CRDs first and
	// waits until the new kinds are served.
	objects, crd := seed002(t)
	out := c.allot(t, "apply", "-f", objects, "-f", crd, "-f", "testdata/pods.yaml")
	requireLines(t, "allot apply -f seed-002.yaml -f seed-002-crd.yaml -f pods.yaml", out,
		"namespace/user-namespace created",
		"customresourcedefinition.apiextensions.k8s.io/cardparameters.dra.example.com created",
		"node/worker-1 created",
		"noderesourceslice.resource.k8s.io/worker-1-cards created",
		"cardparameters.dra.example.com/my-parameters created",
		"resourceclaimparameters.resource.k8s.io/my-parameters-generated created",
		"resourceclass.resource.k8s.io/acme-cards created",
		"resourceclaim.resource.k8s.io/two-cards created",
		"pod/card-user created", "pod/web created", "pod/worker created", "pod/temp-1 created", "pod/temp-2 created")
	requireLines(t, "allot apply -f pods.yaml (again)", c.allot(t, "apply", "-f", "testdata/pods.yaml"),
		"pod/web unchanged", "pod/worker unchanged", "pod/temp-1 unchanged", "pod/temp-2 unchanged")

	t.Run("get", func(t *testing.T) { cliGet(t, c) })
	t.Run("apply with kubectl", func(t *testing.T) { cliApplyMixed(t, c) })
	t.Run("watch", func(t *testing.T) { cliWatch(t, c) })
	t.Run("delete", func(t *testing.T) { cliDelete(t, c) })
	t.Run("errors", func(t *testing.T) { cliErrors(t, c) })
	t.Run("restart", func(t *testing.T) {
		c.restart(t)
		requireTable(t, c.allot(t, "get", "pods", "-n", ns), []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"},
			map[string]map[string]string{"card-user": {"STATUS": "Pending"}, "web": {"STATUS": "Pending"}})
	})
}

func cliGet(t *testing.T, c *cluster) {
	requireTable(t, c.allot(t, "get", "pods", "-n", ns), []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"},
		map[string]map[string]string{
			"card-user": {"READY": "0/1", "STATUS": "Pending", "RESTARTS": "0"},
			"web":       {"READY": "0/1", "STATUS": "Pending"},
		})
	requireTable(t, c.allot(t, "get", v1alpha2Claims, "-A"),
		[]string{"NAMESPACE", "NAME", "CLASS", "ALLOCATION", "STATE", "AGE"},
		map[string]map[string]string{"two-cards": {"NAMESPACE": ns, "CLASS": "acme-cards", "STATE": "pending"}})
	requireTable(t, c.allot(t, "get", "pods", "-n", ns, "-l", "app=web", "--show-labels"),
		[]string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "LABELS"},
		map[string]map[string]string{"web": {"LABELS": "app=web,tier=backend"}})

	obj := c.getYAMLWith(t, c.allot, "cardparameters", "my-parameters", "-n", ns)
	requireFields(t, "allot get cardparameters -o yaml", obj, map[string]any{
		"kind": "CardParameters", "spec.count": 2, "spec.sharing.strategy": "TimeSliced", "metadata.uid": nonEmpty,
	})
	uid, _ := field(obj, "metadata", "uid")
	if want := c.jsonpath(t, "{.metadata.uid}", "cardparameters", "my-parameters", "-n", ns); uid != want {
		t.Errorf("allot get and kubectl get disagree on the uid of my-parameters: %v vs %s", uid, want)
	}
	out := c.allot(t, "describe", "pod", "card-user", "-n", ns)
	requireContains(t, "allot describe pod card-user", out, "card-user", "Resource Claims:", "claim two-cards", "Status:       Pending")
}

// cliApplyMixed applies the same manifests with allot and kubectl in turn:
// both keep kubectl's last-applied-configuration annotation.
func cliApplyMixed(t *testing.T, c *cluster) {
	steps := []struct {
		tool, file, verb string
	}{
		{"allot", "apply.yaml", "created"},
		{"kubectl", "apply.yaml", "unchanged"},
		{"kubectl", "apply-v2.yaml", "configured"},
		{"allot", "apply-v2.yaml", "unchanged"},
		{"allot", "apply.yaml", "configured"},
		{"kubectl", "apply.yaml", "unchanged"},
	}
	for _, s := range steps {
		args := []string{"apply", "-f", "testdata/" + s.file}
		var out string
		if s.tool == "allot" {
			out = c.allot(t, args...)
		} else {
			out = c.kubectl(t, args...)
		}
		requireLines(t, s.tool+" apply -f "+s.file, out,
			"pod/applied "+s.verb, "cardparameters.dra.example.com/applied-params "+s.verb)
	}
	if got := c.jsonpath(t, "{.metadata.labels.version} {.spec.containers[0].image}", "pod", "applied", "-n", ns); got != "v1 busybox" {
		t.Errorf("pod applied after the mixed applies: version image = %q, want %q", got, "v1 busybox")
	}
	if got := c.jsonpath(t, "{.spec.count}", "cardparameters", "applied-params", "-n", ns); got != "1" {
		t.Errorf("cardparameters applied-params after the mixed applies: count = %q, want 1", got)
	}
}

func cliWatch(t *testing.T, c *cluster) {
	w := c.allotWatch(t, "get", "pods", "-n", ns, "-w", "--show-labels")
	isWeb := func(s string) bool { return strings.HasPrefix(s, "web ") }
	_, first, err := w.Stdout.WaitFor(0, watchTimeout, isWeb)
	if err != nil {
		t.Fatalf("allot get pods -w: no row for web: %v\nstdout:\n%s\nstderr:\n%s", err, w.Stdout, w.Stderr)
	}
	c.kubectl(t, "label", "pod", "web", "-n", ns, "stage=cli")
	_, _, err = w.Stdout.WaitFor(first+1, watchTimeout, func(s string) bool { return isWeb(s) && strings.Contains(s, "stage=cli") })
	if err != nil {
		t.Fatalf("allot get pods -w did not show the label change: %v\nstdout:\n%s\nstderr:\n%s", err, w.Stdout, w.Stderr)
	}
	w.Kill()
}

func cliDelete(t *testing.T, c *cluster) {
	requireLines(t, "allot delete pod worker", c.allot(t, "delete", "pod", "worker", "-n", ns), `pod "worker" deleted`)
	stderr := c.allotExpectFail(t, "get", "pod", "worker", "-n", ns)
	requireContains(t, "allot get of a deleted pod: stderr", stderr, `pods "worker" not found`)
	c.kubectlExpectFail(t, "get", "pod", "worker", "-n", ns)
	requireLines(t, "allot delete -f apply.yaml", c.allot(t, "delete", "-f", "testdata/apply.yaml"),
		`pod "applied" deleted`, `cardparameters.dra.example.com "applied-params" deleted`)
	c.kubectlExpectFail(t, "get", "cardparameters", "applied-params", "-n", ns)
}

func cliErrors(t *testing.T, c *cluster) {
	stderr := c.allotExpectFail(t, "apply", "-f", "testdata/bad-pod.yaml")
	requireContains(t, "allot apply -f bad-pod.yaml: stderr", stderr, `unknown field "spec.containers[0].bogusField"`, "nothing was applied")
	c.kubectlExpectFail(t, "get", "pod", "bad-pod", "-n", ns)
	stderr = c.allotExpectFail(t, "logs", "card-user", "-n", ns)
	requireContains(t, "allot logs of an unscheduled pod: stderr", stderr, "card-user")
}

// allotWatch starts an allot client command in the background, like
// kubectlWatch.
func (c *cluster) allotWatch(t *testing.T, args ...string) *proc {
	t.Helper()
	p, err := startProc("allot", childEnv(c.home), allotBin, args...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(p.Kill)
	return p
}
