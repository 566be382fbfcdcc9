// Package auth authenticates API requests by bearer token and authorizes
// them by role.
//
// # Tokens file
//
// Identities live in one file, one token per line, as CSV:
//
//	# token,name,role
//	3f9a...,admin,admin
//	8c21...,node-1,node
//	d07e...,gpu.example.com,driver
//	55b0...,alice,user
//	a1c4...,gpu.example.com@node-1,node-driver
//
// Blank lines and lines starting with '#' are ignored; fields are trimmed of
// surrounding spaces. The role is one of admin, user, scheduler,
// controller-manager, node, driver and node-driver. The name of a node token
// is the node's name and the name of a driver token is the driver's name;
// both must be DNS subdomains, because the authorizer compares them with
// spec.nodeName and ResourceClass.driverName. The name of a node-driver
// token is DRIVER@NODE, one "@" between two DNS subdomains
// ([User.Driver], [User.Node]). Other names must not contain commas or control
// characters. A token may appear only once; a name may have several tokens
// (for rotation). The file holds secrets: keep it mode 0600. A file that
// other users can read is loaded, with a warning.
//
// [NewTokenAuthenticator] loads the file and fails on the first bad line,
// naming its number (never its token). [TokenAuthenticator.Run] reloads the
// file when it changes; a reload that fails keeps the previous tokens and
// logs why. [AppendToken] and [EnsureTokens] write the file atomically
// (temporary file, fsync, rename), so a reader never sees half a file. They
// serialise writers within one process only.
//
// Tokens are kept as SHA-256 hashes and a presented token is looked up by its
// hash, so lookup time does not depend on how much of a token matches.
//
// # Authorization
//
// [Authorize] decides one request from its [Attributes] by the caller's role:
//
//   - admin: everything.
//   - user: reads everything; writes the main resource of namespaced objects
//     (pods, events, resourceclaims, resourceclaimtemplates,
//     resourceclaimparameters, namespaced custom resources with any
//     subresource), namespaces, and leases outside kube-system and
//     kube-node-lease (where the control plane's leases live). Never
//     status or binding subresources of
//     built-in kinds, nodes, resourceclasses, resourceclassparameters,
//     noderesourceslices, podschedulingcontexts, resourcequotas or
//     customresourcedefinitions. A user's claim may not gain, lose or
//     change the delete-protection finalizer or the generated-claim
//     annotation: those are the scheduler's and the claim controller's.
//   - scheduler: reads everything; writes pods/binding, pods/status, events,
//     podschedulingcontexts, resourceclaims/status, and finalizer-only
//     updates of resourceclaims (the structured-allocation delete
//     protection); creates and deletes the resourceclaims it makes for
//     pods' extended resources (annotation
//     resource.kubernetes.io/extended-resource-claim: "true", a pod as
//     controller) and no other; creates, updates, patches and deletes its leader
//     election Lease kube-system/allot-scheduler.
//   - controller-manager: reads everything; writes resourceclaims and their
//     status, pods/status, podschedulingcontexts, events, nodes/status,
//     namespaces (with status and finalize), resourcequotas/status,
//     devicetaintrules/status, its leader election Lease
//     kube-system/allot-controller-manager, and may delete objects of any
//     kind (garbage collection).
//   - node NAME: reads nodes, pods, resourceclaims, resourceclasses,
//     noderesourceslices, resourceclaimtemplates, namespaces, deviceclasses
//     resourceslices and leases; writes its own Node and nodes/status, its
//     heartbeat Lease kube-node-lease/NAME,
//     NodeResourceSlices and resource.k8s.io/v1 ResourceSlices whose
//     spec.nodeName is NAME before and after the write, events, and
//     pods/status and deletion of pods whose stored spec.nodeName is NAME.
//   - driver NAME: reads everything; writes events; updates resourceclaims
//     status (and their finalizers, through the main resource, when nothing
//     else changes) for claims whose ResourceClass has driverName NAME;
//     updates podschedulingcontexts/status when one of the pod's claims
//     belongs to such a class; writes ResourceClaimParameters and
//     ResourceClassParameters whose generatedFrom.apiGroup belongs to it
//     (equals NAME, or NAME ends in "."+apiGroup and apiGroup has a dot);
//     writes v1 ResourceSlices whose spec.driver is NAME before and after
//     the write, per node or not (nodeSelector, allNodes,
//     perDeviceNodeSelection); writes DeviceTaintRules whose
//     spec.deviceSelector.driver is NAME before and after the write; of
//     resource.k8s.io/v1 claims allocated a device of driver NAME, writes
//     the finalizers and the status.devices entries of its own driver,
//     nothing else of their status.
//   - node-driver DRIVER@NODE, a driver's kubelet plugin on one node, with
//     what the upstream kubelet-plugin library uses and nothing more: gets
//     any v1 ResourceSlice; lists and watches them only when
//     [Attributes.FieldSelector] requires spec.driver=DRIVER and
//     spec.nodeName NODE or "" (operator = or ==; further terms only
//     narrow); creates, updates, patches and deletes slices whose
//     spec.driver is DRIVER and spec.nodeName NODE, before and after, never
//     by deletecollection; gets the Node NODE; gets resourceclaims
//     allocated a device of DRIVER and reserved for a pod (same UID) whose
//     spec.nodeName is NODE, and a claim that does not exist (so the
//     answer is 404); updates the status of such resource.k8s.io/v1
//     claims, changing only the status.devices entries of DRIVER; writes
//     events. Nothing else, reads included.
//
// DeviceClasses are admins' to write, DeviceTaintRules admins' and (for
// their own devices) their driver's; v1 ResourceSlices
// for several nodes (nodeSelector, allNodes, perDeviceNodeSelection) are
// admins' and their driver's.
//
// Events may be created, updated and patched by every role except user
// (which writes them like any namespaced object): event recorders patch a
// repeated event to bump its count.
//
// # Privileged marks
//
// A write a role's rules allow is still denied, for every role but admin,
// when it adds, changes or removes a privileged mark (marks.go), judged
// on Object against OldObject (an empty object for create): the label
// [AdminAccessLabel] of namespaces; annotations starting with
// [CDIAnnotationPrefix] of pods; the taints and spec.unschedulable of a
// Node after its creation, and [OutOfServiceTaint] on its creation. The
// denial names the mark.
//
// Known broadenings, accepted for simplicity: a node may list and watch
// pods, claims and slices of the whole cluster (field selectors narrow what
// it asks for, not what it may ask for; for a node-driver the server
// evaluates the required selector on every object it returns, so there it
// narrows what is seen), and a node may change any field of
// its own Node. A custom resource is any resource outside the groups "",
// *.k8s.io and *.kubernetes.io; the API server must refuse
// CustomResourceDefinitions in those groups.
//
// # The caller's duties
//
// The API server calls Authorize after decoding the request and, for
// update and patch, after applying the patch and copying server-owned
// metadata (uid, creationTimestamp, generation) from the stored object, so
// that Object and OldObject differ only in what the client asked to change.
// It ignores status in writes of a main resource and spec in writes of a
// status subresource, and drops the status of every create (Node excepted,
// which its node registers with its status), as Kubernetes does; the rules
// above rely on it: a create must never carry an allocation or a
// reservation. It
// decides anonymous requests itself, allowing only [IsPublicPath] paths and
// discovery.
package auth
