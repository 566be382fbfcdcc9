package auth

import (
	"fmt"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime"
)

// nodeReadable are the resources a node agent reads: what its pods need.
var nodeReadable = []groupResource{grNodes, grPods, grClaims, grClasses, grSlices, grClaimTemplates, grNamespaces, grLeases,
	grDeviceClasses, grResourceSlices}

func authorizeNode(a Attributes, lk Lookup) Decision {
	if isRead(a.Verb) {
		if slices.Contains(nodeReadable, a.groupResource()) && (a.Subresource == "" || a.Subresource == "status") {
			return allow("%s may read %s", a.User, a.resourceString())
		}
		return deny("%s may only read nodes, pods, resourceclaims, resourceclasses, noderesourceslices, resourceclaimtemplates, namespaces, deviceclasses, resourceslices and leases, not %s",
			a.User, a.resourceString())
	}
	switch {
	case a.is(grNodes, "") && slices.Contains([]string{"create", "update", "patch"}, a.Verb),
		a.is(grNodes, "status") && slices.Contains(updateVerbs, a.Verb):
		return nodeOwnNode(a)
	case a.is(grSlices, "") && slices.Contains(crudVerbs, a.Verb):
		return nodeOwnSlice(a)
	case a.is(grResourceSlices, "") && slices.Contains(crudVerbs, a.Verb):
		return ownResourceSlice(a, sliceField{"spec.nodeName", a.User.Name, func(s *resourcev1.ResourceSlice) string { return ptrString(s.Spec.NodeName) }})
	case a.is(grEvents, "") && slices.Contains(eventVerbs, a.Verb):
		return allow("%s may write events", a.User)
	case isLeaseWrite(a):
		return ownLease(a, NodeLeaseNamespace, a.User.Name)
	case a.is(grPods, "status") && slices.Contains(updateVerbs, a.Verb),
		a.is(grPods, "") && a.Verb == "delete":
		return nodeBoundPod(a, lk)
	}
	return deny("%s may not %s %s: nodes write only their own Node and heartbeat Lease, their NodeResourceSlices and ResourceSlices, events, and status and deletion of their pods",
		a.User, a.Verb, a.resourceString())
}

// nodeOwnNode allows writes of the Node named like the node's user. The name
// comes from the URL, or from the object on create.
func nodeOwnNode(a Attributes) Decision {
	name := a.Name
	if a.Object != nil {
		objName, err := objectName(a.Object)
		if err != nil {
			return deny("%s: read new Node: %v", a.User, err)
		}
		if name == "" {
			name = objName
		} else if objName != "" && objName != name {
			return deny("%s: Node name %q in the body does not match %q in the path", a.User, objName, name)
		}
	}
	if name != a.User.Name {
		return deny("%s may only write its own Node %q, not %q", a.User, a.User.Name, name)
	}
	return allow("%s may write its own Node", a.User)
}

func objectName(obj runtime.Object) (string, error) {
	m, err := meta.Accessor(obj)
	if err != nil {
		return "", err
	}
	return m.GetName(), nil
}

// judgedObjects are the objects a write is judged on: the object as
// written (not for delete) and as stored (not for create), so that a
// writer can neither create nor take over what is not its own.
func (a Attributes) judgedObjects() []runtime.Object {
	var objs []runtime.Object
	if a.Verb != "delete" {
		objs = append(objs, a.Object)
	}
	if a.Verb != "create" {
		objs = append(objs, a.OldObject)
	}
	return objs
}

// nodeOwnSlice allows writes of NodeResourceSlices whose spec.nodeName is the
// node, both as stored and as written, so a node can neither touch another
// node's slice nor move a slice between nodes.
func nodeOwnSlice(a Attributes) Decision {
	for _, obj := range a.judgedObjects() {
		s, err := as[resourcev1alpha2.NodeResourceSlice](obj)
		if err != nil {
			return deny("%s: read NodeResourceSlice: %v", a.User, err)
		}
		if s.Spec.NodeName != a.User.Name {
			return deny("%s may only write NodeResourceSlices with spec.nodeName %q, not %q",
				a.User, a.User.Name, s.Spec.NodeName)
		}
	}
	return allow("%s may write NodeResourceSlices with spec.nodeName %q", a.User, a.User.Name)
}

// sliceField is a field of a v1 ResourceSlice that a writer must own: path
// names it in reasons, want is the writer's value, get reads it.
type sliceField struct {
	path, want string
	get        func(*resourcev1.ResourceSlice) string
}

// ownResourceSlice allows writes of v1 ResourceSlices whose fields are the
// writer's, both as stored and as written, so a node, driver or
// node-driver can neither touch another's slice nor move a slice to
// another.
func ownResourceSlice(a Attributes, want ...sliceField) Decision {
	for _, obj := range a.judgedObjects() {
		s, err := as[resourcev1.ResourceSlice](obj)
		if err != nil {
			return deny("%s: read ResourceSlice: %v", a.User, err)
		}
		for _, f := range want {
			if v := f.get(s); v != f.want {
				hint := ""
				if f.path == "spec.nodeName" && v == "" {
					hint = "; slices with nodeSelector, allNodes or perDeviceNodeSelection are written by drivers and admins"
				}
				return deny("%s may only write ResourceSlices with %s %q, not %q%s", a.User, f.path, f.want, v, hint)
			}
		}
	}
	paths := make([]string, len(want))
	for i, f := range want {
		paths[i] = fmt.Sprintf("%s %q", f.path, f.want)
	}
	return allow("%s may write ResourceSlices with %s", a.User, strings.Join(paths, " and "))
}

func ptrString(p *string) string {
	if p == nil {
		return ""
	}
	return *p
}

// nodeBoundPod allows status updates and deletion of pods bound to the node,
// judged by the stored pod: a node cannot claim a pod by writing its spec.
func nodeBoundPod(a Attributes, lk Lookup) Decision {
	var pod *corev1.Pod
	var err error
	if a.OldObject != nil {
		pod, err = as[corev1.Pod](a.OldObject)
	} else {
		pod, err = lookupPod(lk, a.Namespace, a.Name)
	}
	if err != nil {
		return deny("%s: look up pod %s/%s: %v", a.User, a.Namespace, a.Name, err)
	}
	if pod.Spec.NodeName != a.User.Name {
		return deny("%s may only update the status of and delete pods with spec.nodeName %q; pod %s/%s has %q",
			a.User, a.User.Name, a.Namespace, a.Name, pod.Spec.NodeName)
	}
	return allow("%s may update the status of and delete pods bound to it", a.User)
}
