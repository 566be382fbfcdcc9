package auth

import (
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
	"tags.cncf.io/container-device-interface/pkg/cdi"
)

var (
	nsPlain   = makeNamespace("team-b", map[string]string{"team": "b"})
	nsAdmin   = makeNamespace("team-b", map[string]string{"team": "b", AdminAccessLabel: "true"})
	nsAdminNo = makeNamespace("team-b", map[string]string{"team": "b", AdminAccessLabel: "false"})
)

// TestNamespaceAdminAccessLabel: only admins add, change or remove
// resource.kubernetes.io/admin-access on namespaces, on create, update and
// patch; other labels stay the writer's.
func TestNamespaceAdminAccessLabel(t *testing.T) {
	ns := func(u User, verb string) attrs { return req(u, verb, "namespaces").named("team-b") }
	relabelled := makeNamespace("team-b", map[string]string{"team": "c", AdminAccessLabel: "true"})
	runAuthCases(t, map[string]authCase{
		"user creates labelled namespace":     {attrs: ns(alice, "create").object(nsAdmin), reason: AdminAccessLabel},
		"user creates plain namespace":        {attrs: ns(alice, "create").object(nsPlain), allowed: true},
		"user adds the label":                 {attrs: ns(alice, "update").object(nsAdmin).oldObject(nsPlain), reason: AdminAccessLabel},
		"user patches the label in":           {attrs: ns(alice, "patch").object(nsAdmin).oldObject(nsPlain), reason: AdminAccessLabel},
		"user changes the label":              {attrs: ns(alice, "patch").object(nsAdminNo).oldObject(nsAdmin), reason: AdminAccessLabel},
		"user removes the label":              {attrs: ns(alice, "update").object(nsPlain).oldObject(nsAdmin), reason: AdminAccessLabel},
		"user relabels a labelled namespace":  {attrs: ns(alice, "patch").object(relabelled).oldObject(nsAdmin), allowed: true},
		"user deletes a labelled namespace":   {attrs: ns(alice, "delete").oldObject(nsAdmin), allowed: true},
		"controller-manager adds the label":   {attrs: ns(cm, "update").object(nsAdmin).oldObject(nsPlain), reason: AdminAccessLabel},
		"controller-manager keeps the label":  {attrs: ns(cm, "update").object(relabelled).oldObject(nsAdmin), allowed: true},
		"admin creates labelled namespace":    {attrs: ns(root, "create").object(nsAdmin), allowed: true},
		"admin removes the label":             {attrs: ns(root, "patch").object(nsPlain).oldObject(nsAdmin), allowed: true},
		"user update without a stored object": {attrs: ns(alice, "update").object(nsPlain), reason: "read namespace"},
	})
}

// TestPodCDIAnnotations: only admins add, change or remove cdi.k8s.io/
// annotations on pods, which the node turns into injected devices.
func TestPodCDIAnnotations(t *testing.T) {
	if CDIAnnotationPrefix != cdi.AnnotationPrefix {
		t.Fatalf("CDIAnnotationPrefix %q, the CDI library's %q", CDIAnnotationPrefix, cdi.AnnotationPrefix)
	}
	pod := func(u User, verb string) attrs { return req(u, verb, "pods").named("p") }
	plain := podWithAnnotations(map[string]string{"note": "x"})
	gpu0 := podWithAnnotations(map[string]string{"note": "x", "cdi.k8s.io/gpu": "example.com/gpu=gpu0"})
	gpu1 := podWithAnnotations(map[string]string{"note": "x", "cdi.k8s.io/gpu": "example.com/gpu=gpu1"})
	noted := podWithAnnotations(map[string]string{"note": "y", "cdi.k8s.io/gpu": "example.com/gpu=gpu0"})
	runAuthCases(t, map[string]authCase{
		"user creates pod with CDI annotation":  {attrs: pod(alice, "create").object(gpu0), reason: "cdi.k8s.io/gpu"},
		"user creates plain pod":                {attrs: pod(alice, "create").object(plain), allowed: true},
		"user adds CDI annotation":              {attrs: pod(alice, "patch").object(gpu0).oldObject(plain), reason: "cdi.k8s.io/gpu"},
		"user changes CDI annotation":           {attrs: pod(alice, "update").object(gpu1).oldObject(gpu0), reason: "cdi.k8s.io/gpu"},
		"user removes CDI annotation":           {attrs: pod(alice, "update").object(plain).oldObject(gpu0), reason: "cdi.k8s.io/gpu"},
		"user changes another annotation":       {attrs: pod(alice, "patch").object(noted).oldObject(gpu0), allowed: true},
		"user deletes pod with CDI annotation":  {attrs: pod(alice, "delete").oldObject(gpu0), allowed: true},
		"admin creates pod with CDI annotation": {attrs: pod(root, "create").object(gpu0), allowed: true},
		"admin changes CDI annotation":          {attrs: pod(root, "update").object(gpu1).oldObject(gpu0), allowed: true},
	})
}

// TestNodeTaints: a node registers without the out-of-service taint and
// never changes its Node's taints or spec.unschedulable afterwards;
// admins do.
func TestNodeTaints(t *testing.T) {
	node := func(u User, verb string) attrs { return req(u, verb, "nodes").named("n1") }
	n1 := makeNode("n1")
	oos := withTaint(n1, OutOfServiceTaint, corev1.TaintEffectNoExecute)
	gpuTaint := withTaint(n1, "example.com/gpu", corev1.TaintEffectNoSchedule)
	gpuTaintLabelled := gpuTaint.DeepCopy()
	gpuTaintLabelled.Labels = map[string]string{"zone": "a"}
	cordoned := n1.DeepCopy()
	cordoned.Spec.Unschedulable = true
	runAuthCases(t, map[string]authCase{
		"node registers out of service":     {attrs: node(node1, "create").object(oos), reason: OutOfServiceTaint},
		"node registers with a taint":       {attrs: node(node1, "create").object(gpuTaint), allowed: true},
		"node taints itself out of service": {attrs: node(node1, "patch").object(oos).oldObject(n1), reason: OutOfServiceTaint},
		"node lifts out-of-service":         {attrs: node(node1, "update").object(n1).oldObject(oos), reason: "spec.taints"},
		"node removes a taint":              {attrs: node(node1, "update").object(n1).oldObject(gpuTaint), reason: "spec.taints"},
		"node uncordons itself":             {attrs: node(node1, "patch").object(n1).oldObject(cordoned), reason: "spec.unschedulable"},
		"node relabels a tainted Node":      {attrs: node(node1, "update").object(gpuTaintLabelled).oldObject(gpuTaint), allowed: true},
		"node status of a tainted Node":     {attrs: node(node1, "update").object(gpuTaint).oldObject(gpuTaint), allowed: true},
		"admin taints out of service":       {attrs: node(root, "patch").object(oos).oldObject(n1), allowed: true},
		"admin lifts out-of-service":        {attrs: node(root, "update").object(n1).oldObject(oos), allowed: true},
	})
}
