package auth

import (
	"context"
	"fmt"
	"path"
	"slices"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	resourcev1 "k8s.io/api/resource/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
)

// Attributes describe one API request for Authorize.
type Attributes struct {
	User User
	// Verb is one of get, list, watch, create, update, patch, delete and
	// deletecollection.
	Verb string
	// APIGroup is "" for the core group. Resource is the plural lowercase
	// name, Subresource for example "status" or "binding".
	APIGroup, Resource, Subresource, Namespace, Name string
	// Namespaced says whether the resource lives in namespaces. The server
	// knows it from its registry, and from the CRD for custom resources.
	Namespaced bool
	// Object is the new object for create, update and patch (after the patch
	// is applied), nil otherwise.
	Object runtime.Object
	// OldObject is the stored object for update, patch and delete, nil for
	// create.
	OldObject runtime.Object
	// FieldSelector is the request's parsed fieldSelector for list, watch
	// and deletecollection, nil otherwise or when it has none.
	FieldSelector fields.Requirements
}

// Lookup reads objects a rule depends on. The API server implements it over
// its watch cache. Returned objects are shared: callers must not modify them.
type Lookup interface {
	GetResourceClass(name string) (*resourcev1alpha2.ResourceClass, error)
	GetPod(namespace, name string) (*corev1.Pod, error)
	GetResourceClaim(namespace, name string) (*resourcev1alpha2.ResourceClaim, error)
	// GetResourceClaimV1 reads a claim as resource.k8s.io/v1; a claim
	// stored as v1alpha2 comes back as a view carrying
	// resourcev1alpha2.StoredVersionAnnotation.
	GetResourceClaimV1(namespace, name string) (*resourcev1.ResourceClaim, error)
}

// Decision is Authorize's answer. Reason is a sentence naming the rule that
// decided, meant for the Forbidden status returned to the client and for
// logs.
type Decision struct {
	Allowed bool
	Reason  string
}

func allow(format string, args ...any) Decision {
	return Decision{Allowed: true, Reason: fmt.Sprintf(format, args...)}
}

func deny(format string, args ...any) Decision {
	return Decision{Allowed: false, Reason: fmt.Sprintf(format, args...)}
}

// Authorize decides whether a.User may do the request by the rules of its
// role (see the package doc). It never returns an error: a failed lookup
// denies, with the error in the reason. It does not use ctx today; Lookup
// reads an in-memory cache.
func Authorize(ctx context.Context, a Attributes, lk Lookup) Decision {
	if a.User.Name == "" {
		return deny("anonymous requests may only reach public paths")
	}
	if a.User.Role == RoleAdmin {
		return allow("admin %q may do everything", a.User.Name)
	}
	d := authorizeRole(a, lk)
	if d.Allowed {
		// A write the role may do still may not touch a privileged
		// mark (marks.go): those are admins'.
		if m := heldMarks(a); !m.Allowed {
			return m
		}
	}
	return d
}

// authorizeRole decides by the rules of a role other than admin.
func authorizeRole(a Attributes, lk Lookup) Decision {
	switch a.User.Role {
	case RoleUser:
		return authorizeUser(a)
	case RoleScheduler:
		return authorizeScheduler(a, lk)
	case RoleControllerManager:
		return authorizeControllerManager(a)
	case RoleNode:
		return authorizeNode(a, lk)
	case RoleDriver:
		return authorizeDriver(a, lk)
	case RoleNodeDriver:
		return authorizeNodeDriver(a, lk)
	}
	return deny("unknown role %q", a.User.Role)
}

// publicPaths may be served without authentication, with their sub-checks
// such as /readyz/etcd.
var publicPaths = []string{"/healthz", "/readyz", "/livez", "/version"}

// IsPublicPath reports whether an anonymous request may get path: the health
// endpoints and /version. Discovery and OpenAPI are the server's call. A path
// that is not clean ("/healthz/../api") is never public.
func IsPublicPath(p string) bool {
	if p == "" || path.Clean(p) != p {
		return false
	}
	for _, pub := range publicPaths {
		if p == pub || strings.HasPrefix(p, pub+"/") {
			return true
		}
	}
	return false
}

// groupResource names a built-in resource.
type groupResource struct{ group, resource string }

// Built-in resources that rules name.
var (
	grPods            = groupResource{"", "pods"}
	grNodes           = groupResource{"", "nodes"}
	grNamespaces      = groupResource{"", "namespaces"}
	grEvents          = groupResource{"", "events"}
	grResourceQuotas  = groupResource{"", "resourcequotas"}
	grClasses         = groupResource{resourcev1alpha2.GroupName, "resourceclasses"}
	grClaims          = groupResource{resourcev1alpha2.GroupName, "resourceclaims"}
	grClaimTemplates  = groupResource{resourcev1alpha2.GroupName, "resourceclaimtemplates"}
	grSchedContexts   = groupResource{resourcev1alpha2.GroupName, "podschedulingcontexts"}
	grSlices          = groupResource{resourcev1alpha2.GroupName, "noderesourceslices"}
	grClaimParameters = groupResource{resourcev1alpha2.GroupName, "resourceclaimparameters"}
	grClassParameters = groupResource{resourcev1alpha2.GroupName, "resourceclassparameters"}
	// resource.k8s.io/v1 kinds. ResourceClaims and ResourceClaimTemplates
	// are served in both versions under the same group and resource, so
	// grClaims and grClaimTemplates cover both.
	grDeviceClasses    = groupResource{resourcev1alpha2.GroupName, "deviceclasses"}
	grResourceSlices   = groupResource{resourcev1alpha2.GroupName, "resourceslices"}
	grDeviceTaintRules = groupResource{resourcev1alpha2.GroupName, "devicetaintrules"}
)

func (a Attributes) groupResource() groupResource {
	return groupResource{a.APIGroup, a.Resource}
}

func (a Attributes) is(gr groupResource, sub string) bool {
	return a.groupResource() == gr && a.Subresource == sub
}

// resourceString names the request's resource for reasons, like kubectl:
// "pods/status", "noderesourceslices.resource.k8s.io".
func (a Attributes) resourceString() string {
	s := a.Resource
	if a.APIGroup != "" {
		s += "." + a.APIGroup
	}
	if a.Subresource != "" {
		s += "/" + a.Subresource
	}
	return s
}

func (u User) String() string { return fmt.Sprintf("%s %q", u.Role, u.Name) }

// Verb sets.
var (
	readVerbs   = []string{"get", "list", "watch"}
	writeVerbs  = []string{"create", "update", "patch", "delete", "deletecollection"}
	updateVerbs = []string{"update", "patch"}
	crudVerbs   = []string{"create", "update", "patch", "delete"}
	deleteVerbs = []string{"delete", "deletecollection"}
	// eventVerbs include update and patch because recorders patch a
	// repeated event to bump its count.
	eventVerbs = []string{"create", "update", "patch"}
)

func isRead(verb string) bool { return slices.Contains(readVerbs, verb) }

// isCustom reports whether group is outside the built-in groups: "",
// *.k8s.io and *.kubernetes.io.
func isCustom(group string) bool {
	for _, g := range []string{"k8s.io", "kubernetes.io"} {
		if group == g || strings.HasSuffix(group, "."+g) {
			return false
		}
	}
	return group != ""
}

// userWritable are built-in namespaced resources users write (main resource
// only).
var userWritable = []groupResource{grPods, grEvents, grClaims, grClaimTemplates, grClaimParameters}

func authorizeUser(a Attributes) Decision {
	switch {
	case isRead(a.Verb):
		return allow("%s may read everything", a.User)
	case !slices.Contains(writeVerbs, a.Verb):
		return deny("%s may not %s: unknown verb", a.User, a.Verb)
	case isCustom(a.APIGroup) && a.Namespaced:
		return allow("%s may write namespaced custom resources", a.User)
	case isCustom(a.APIGroup):
		return deny("%s may only write namespaced custom resources, not cluster-scoped %s", a.User, a.resourceString())
	case a.is(grClaims, "") && (a.Verb == "create" || slices.Contains(updateVerbs, a.Verb)):
		return userClaimMarks(a)
	case a.is(grLeases, ""):
		return userLease(a)
	case a.is(grNamespaces, ""), a.Subresource == "" && slices.Contains(userWritable, a.groupResource()):
		return allow("%s may write namespaces and namespaced objects", a.User)
	}
	return deny("%s may not %s %s: users write only namespaces, pods, events, resourceclaims, resourceclaimtemplates, resourceclaimparameters, leases (outside kube-system and kube-node-lease) and namespaced custom resources, without subresources",
		a.User, a.Verb, a.resourceString())
}

// grant lets a role use verbs on one resource and subresource.
type grant struct {
	gr    groupResource
	sub   string
	verbs []string
}

func matchGrants(a Attributes, grants []grant) bool {
	for _, g := range grants {
		if a.is(g.gr, g.sub) && slices.Contains(g.verbs, a.Verb) {
			return true
		}
	}
	return false
}

// authorizeGrants allows reads of everything and the writes in grants;
// what names the grants in a denial.
func authorizeGrants(a Attributes, grants []grant, what string) Decision {
	if isRead(a.Verb) {
		return allow("%s may read everything", a.User)
	}
	if matchGrants(a, grants) {
		return allow("%s may %s %s", a.User, a.Verb, a.resourceString())
	}
	return deny("%s may not %s %s: it writes only %s", a.User, a.Verb, a.resourceString(), what)
}

var schedulerGrants = []grant{
	{grPods, "binding", []string{"create"}},
	{grPods, "status", updateVerbs},
	{grEvents, "", eventVerbs},
	{grSchedContexts, "", crudVerbs},
	{grClaims, "status", updateVerbs},
}

func authorizeScheduler(a Attributes, lk Lookup) Decision {
	if a.is(grClaims, "") && slices.Contains(updateVerbs, a.Verb) {
		// The scheduler sets the delete-protection finalizer on claims it
		// allocates with structured parameters.
		if d := claimFinalizersOnly(a, lk); !d.Allowed {
			return d
		}
		return allow("%s may change finalizers of resourceclaims", a.User)
	}
	if a.is(grClaims, "") && (a.Verb == "create" || a.Verb == "delete") {
		return extendedResourceClaimWrite(a)
	}
	if isLeaseWrite(a) {
		return ownLease(a, SystemNamespace, SchedulerLeaseName)
	}
	return authorizeGrants(a, schedulerGrants,
		"pods/binding, pods/status, events, podschedulingcontexts, resourceclaims/status, finalizers of resourceclaims, claims for pods' extended resources and its lease")
}

var controllerManagerGrants = []grant{
	{grClaims, "", crudVerbs},
	{grClaims, "status", updateVerbs},
	{grPods, "status", updateVerbs},
	{grSchedContexts, "", crudVerbs},
	{grEvents, "", eventVerbs},
	{grNodes, "status", updateVerbs},
	{grNamespaces, "", []string{"update", "patch", "delete"}},
	{grNamespaces, "status", updateVerbs},
	{grNamespaces, "finalize", updateVerbs},
	{grResourceQuotas, "status", updateVerbs},
	{grDeviceTaintRules, "status", updateVerbs},
}

func authorizeControllerManager(a Attributes) Decision {
	if a.Subresource == "" && slices.Contains(deleteVerbs, a.Verb) {
		return allow("%s may delete objects of any kind (garbage collection)", a.User)
	}
	if a.Subresource == "" && (a.Verb == "update" || a.Verb == "patch") && metadataOnlyChange(a.Object, a.OldObject) {
		return allow("%s may change owner references and finalizers of any object (garbage collection)", a.User)
	}
	if isLeaseWrite(a) {
		return ownLease(a, SystemNamespace, ControllerManagerLeaseName)
	}
	if a.is(grNodes, "") && (a.Verb == "update" || a.Verb == "patch") {
		if n, err := as[corev1.Node](a.Object); err == nil {
			if old, err := as[corev1.Node](a.OldObject); err == nil && nodeLifecycleTaintsOnly(n, old) {
				return allow("%s may set and clear the node lifecycle taints (%v)", a.User, lifecycleTaintKeys)
			}
		}
	}
	return authorizeGrants(a, controllerManagerGrants,
		"resourceclaims, resourceclaims/status, pods/status, podschedulingcontexts, events, nodes/status, namespaces, resourcequotas/status, devicetaintrules/status, its lease, and deletes")
}
