package auth

import (
	"slices"

	coordinationv1 "k8s.io/api/coordination/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// Leases (coordination.k8s.io/v1) the system components hold: the leader
// election locks of the scheduler and the controller manager in
// kube-system, and each node's heartbeat in kube-node-lease, named like
// the node.
const (
	SystemNamespace            = "kube-system"
	NodeLeaseNamespace         = corev1.NamespaceNodeLease
	SchedulerLeaseName         = "allot-scheduler"
	ControllerManagerLeaseName = "allot-controller-manager"
)

var grLeases = groupResource{coordinationv1.GroupName, "leases"}

// leaseVerbs are the writes a lease holder makes (client-go's LeaseLock
// creates and updates; a component may also give its lease back).
var leaseVerbs = []string{"create", "update", "patch", "delete"}

// systemLeaseNamespaces hold the leases the control plane depends on;
// users may not write there (a lease taken there would stop a component
// from leading, or fake a node's heartbeat).
var systemLeaseNamespaces = []string{SystemNamespace, NodeLeaseNamespace}

// requestName is the object's name: from the URL, or from the object on
// create.
func requestName(a Attributes) string {
	if a.Name != "" || a.Object == nil {
		return a.Name
	}
	if o, ok := a.Object.(interface{ GetName() string }); ok {
		return o.GetName()
	}
	return ""
}

// isLeaseWrite reports whether a is a write of leases.
func isLeaseWrite(a Attributes) bool {
	return a.is(grLeases, "") && !isRead(a.Verb)
}

// ownLease allows the lease writes of a component to its one lease,
// namespace/name, and nothing else among leases.
func ownLease(a Attributes, namespace, name string) Decision {
	if !slices.Contains(leaseVerbs, a.Verb) {
		return deny("%s may not %s leases: it writes only its own lease %s/%s", a.User, a.Verb, namespace, name)
	}
	if a.Namespace != namespace || requestName(a) != name {
		return deny("%s may write only its own lease %s/%s, not %s/%s", a.User, namespace, name, a.Namespace, requestName(a))
	}
	return allow("%s may %s its lease %s/%s", a.User, a.Verb, namespace, name)
}

// userLease allows users lease writes outside the system namespaces (their
// own controllers' leader election).
func userLease(a Attributes) Decision {
	if slices.Contains(systemLeaseNamespaces, a.Namespace) {
		return deny("%s may not %s leases in %s: that namespace holds the control plane's leases", a.User, a.Verb, a.Namespace)
	}
	return allow("%s may write leases outside %v", a.User, systemLeaseNamespaces)
}
