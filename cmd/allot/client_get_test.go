package main

import (
	"bufio"
	"context"
	"encoding/json"
	"io"
	"os/exec"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	corev1 "allot.dev/allot/api/core/v1"
)

func TestGetTables(t *testing.T) {
	ns := applyFixture(t, "get-tables")
	tests := map[string]struct {
		args     []string
		header   []string
		names    []string // NAME column, or the first when -A
		firstCol []string
	}{
		"plural": {args: []string{"get", "pods", "-n", ns},
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, names: []string{"db", "web"}},
		"short name": {args: []string{"get", "po", "-n", ns},
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, names: []string{"db", "web"}},
		"Kind and wide": {args: []string{"get", "Pod", "-n", ns, "-o", "wide"},
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE", "NODE"}, names: []string{"db", "web"}},
		"label selector": {args: []string{"get", "pod", "-n", ns, "-l", "app=web"},
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, names: []string{"web"}},
		"field selector": {args: []string{"get", "pods", "-n", ns, "--field-selector", "spec.nodeName=cli-node"},
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, names: []string{"db"}},
		"by name": {args: []string{"get", "pods", "web", "-n", ns},
			header: []string{"NAME", "READY", "STATUS", "RESTARTS", "AGE"}, names: []string{"web"}},
		"cluster-scoped short name": {args: []string{"get", "ns", ns},
			header: []string{"NAME", "STATUS", "AGE"}, names: []string{ns}},
		"kind with group": {args: []string{"get", "resourceclaims.resource.k8s.io", "-n", ns},
			header: nil, names: []string{"gpu"}},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			rows := fields(allot(t, tc.args...))
			if tc.header != nil {
				assertEqual(t, "header", rows[0], tc.header)
			}
			assertEqual(t, "names", column(rows[1:], 0), tc.names)
		})
	}
}

func TestGetAllNamespacesAndColumnsAlign(t *testing.T) {
	a := applyFixture(t, "get-all")
	b := applyFixture(t, "get-all")
	out := allot(t, "get", "pods", "-A", "-l", "app=web")
	var lines []string
	for _, l := range strings.Split(strings.TrimRight(out, "\n"), "\n") {
		if strings.HasPrefix(l, "NAMESPACE") || strings.HasPrefix(l, a+" ") || strings.HasPrefix(l, b+" ") {
			lines = append(lines, l)
		}
	}
	if len(lines) != 3 {
		t.Fatalf("output:\n%s\nwant a header and the web pods of %s and %s", out, a, b)
	}
	col := strings.Index(lines[0], "NAME ")
	for _, l := range lines[1:] {
		if !strings.HasPrefix(l[col:], "web ") {
			t.Fatalf("NAME column not aligned at %d:\n%s", col, out)
		}
	}
	if r := runCLI(t, "", "get", "pods", "-n", a, "-l", "app=none"); r.err != nil || r.stdout != "" || r.stderr != "No resources found in "+a+" namespace.\n" {
		t.Fatalf("empty list: err %v stdout %q stderr %q", r.err, r.stdout, r.stderr)
	}
}

func TestGetStructuredOutputs(t *testing.T) {
	ns := applyFixture(t, "get-out")
	var pod corev1.Pod
	if err := yaml.UnmarshalStrict([]byte(allot(t, "get", "pod", "web", "-n", ns, "-o", "yaml")), &pod); err != nil {
		t.Fatalf("-o yaml is not a strict Pod: %v", err)
	}
	if pod.Name != "web" || pod.Kind != "Pod" || pod.Spec.Containers[0].Image != "busybox" {
		t.Fatalf("-o yaml pod = %s %s", pod.Kind, pod.Name)
	}
	// managedFields only on request, as kubectl shows them.
	if len(pod.ManagedFields) != 0 {
		t.Fatalf("-o yaml shows managedFields: %+v", pod.ManagedFields)
	}
	if out := allot(t, "get", "pod", "web", "-n", ns, "-o", "yaml", "--show-managed-fields"); !strings.Contains(out, "managedFields:") {
		t.Fatalf("--show-managed-fields: %s", out)
	}
	var list struct {
		APIVersion string            `json:"apiVersion"`
		Kind       string            `json:"kind"`
		Items      []json.RawMessage `json:"items"`
	}
	if err := json.Unmarshal([]byte(allot(t, "get", "pods", "-n", ns, "-o", "json")), &list); err != nil {
		t.Fatalf("-o json: %v", err)
	}
	if list.APIVersion != "v1" || list.Kind != "List" || len(list.Items) != 2 {
		t.Fatalf("-o json = %s %s with %d items", list.APIVersion, list.Kind, len(list.Items))
	}
	// An empty list has "items": [], as the API and kubectl print it.
	// (No test of this package creates class parameters; the fixture's
	// namespace has no scheduling contexts.)
	if empty := allot(t, "get", "resourceclassparameters", "-A", "-o", "json"); !strings.Contains(empty, `"items": []`) {
		t.Fatalf("-A -o json of an empty list = %s", empty)
	}
	if empty := allot(t, "get", "podschedulingcontexts", "-n", ns, "-o", "yaml"); !strings.Contains(empty, "items: []") {
		t.Fatalf("-o yaml of an empty list = %s", empty)
	}
	if got := allot(t, "get", "pods,resourceclaims", "-n", ns, "-o", "name"); got != "pod/db\npod/web\nresourceclaim.resource.k8s.io/gpu\n" {
		t.Fatalf("-o name = %q", got)
	}
	if got := allot(t, "get", "pod/web", "ns/"+ns, "-n", ns, "-o", "name"); got != "pod/web\nnamespace/"+ns+"\n" {
		t.Fatalf("KIND/NAME -o name = %q", got)
	}
}

func TestGetErrors(t *testing.T) {
	if stderr := allotFails(t, "get", "nosuchkind"); stderr != "error: the server doesn't have a resource type \"nosuchkind\"\n" {
		t.Fatalf("unknown kind: %q", stderr)
	}
	if stderr := allotFails(t, "get", "pod", "missing", "-n", "default"); stderr != "error: pods \"missing\" not found\n" {
		t.Fatalf("missing pod: %q", stderr)
	}
	if stderr := allotFails(t, "get", "pods", "-o", "xml"); !strings.Contains(stderr, `unknown output format "xml"`) {
		t.Fatalf("bad output: %q", stderr)
	}
}

func TestGetWatchPrintsChanges(t *testing.T) {
	ns := applyFixture(t, "get-watch")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, allotBin, "get", "pods", "-n", ns, "-w")
	cmd.Env = testCluster.Env()
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start get -w: %v", err)
	}
	defer func() { _ = cmd.Process.Kill(); _ = cmd.Wait() }()
	lines := make(chan string, 100)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
		_, _ = io.Copy(io.Discard, stdout)
	}()
	next := func(what string) []string {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("get -w ended before %s", what)
			}
			return strings.Fields(l)
		case <-ctx.Done():
			t.Fatalf("no line for %s", what)
		}
		return nil
	}
	for _, want := range []string{"NAME", "db", "web"} {
		if f := next(want); f[0] != want {
			t.Fatalf("line %v, want %s first", f, want)
		}
	}
	c := newTestClient(t)
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "late"}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
	if _, err := c.Pods(ns).Create(testCtx(t), pod); err != nil {
		t.Fatalf("create pod: %v", err)
	}
	if f := next("the new pod"); f[0] != "late" || f[2] != "Pending" {
		t.Fatalf("watch row %v, want the new pod, Pending", f)
	}
}
