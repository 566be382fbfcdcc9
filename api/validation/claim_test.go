package validation

import (
	"fmt"
	"strings"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

func TestValidateResourceClass(t *testing.T) {
	class := func(f func(*resourcev1alpha2.ResourceClass)) *resourcev1alpha2.ResourceClass {
		c := &resourcev1alpha2.ResourceClass{ObjectMeta: objMeta("gpu", ""), DriverName: "cards.example.com"}
		f(c)
		return c
	}
	selector := func(reqs ...corev1.NodeSelectorRequirement) *corev1.NodeSelector {
		return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: reqs}}}
	}
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"valid":              {errs: ValidateResourceClass(class(func(*resourcev1alpha2.ResourceClass) {}))},
		"no driver":          {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.DriverName = "" })), want: []string{"driverName: Required"}},
		"driver not domain":  {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.DriverName = "Cards" })), want: []string{"driverName"}},
		"controller ok":      {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.ControllerName = "cards.example.com" }))},
		"controller bad":     {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.ControllerName = "Cards!" })), want: []string{"controllerName"}},
		"params ref ok":      {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.ParametersRef = classRef("CardClassParameters", "p") }))},
		"params ref no kind": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.ParametersRef = classRef("", "p") })), want: []string{"parametersRef.kind: Required"}},
		"params ref no name": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.ParametersRef = classRef("K", "") })), want: []string{"parametersRef.name: Required"}},
		"params ref group": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) {
			c.ParametersRef = classRef("K", "p")
			c.ParametersRef.APIGroup = "Bad Group"
		})), want: []string{"parametersRef.apiGroup"}},
		"suitable nodes ok": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) {
			c.SuitableNodes = selector(corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpExists})
		}))},
		"suitable nodes no terms": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) { c.SuitableNodes = &corev1.NodeSelector{} })), want: []string{"suitableNodes.nodeSelectorTerms: Required"}},
		"suitable nodes DoesNotExist with values": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) {
			c.SuitableNodes = selector(corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpDoesNotExist, Values: []string{"x"}})
		})), want: []string{"suitableNodes.nodeSelectorTerms[0].matchExpressions[0].values: Forbidden"}},
		"suitable nodes NotIn without values": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) {
			c.SuitableNodes = selector(corev1.NodeSelectorRequirement{Key: "gpu", Operator: corev1.NodeSelectorOpNotIn})
		})), want: []string{"suitableNodes.nodeSelectorTerms[0].matchExpressions[0].values: Required"}},
		"suitable nodes match field": {errs: ValidateResourceClass(class(func(c *resourcev1alpha2.ResourceClass) {
			c.SuitableNodes = &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{{Key: "metadata.uid", Operator: corev1.NodeSelectorOpExists}}}}}
		})), want: []string{"suitableNodes.nodeSelectorTerms[0].matchFields[0].key", "suitableNodes.nodeSelectorTerms[0].matchFields[0].operator", "suitableNodes.nodeSelectorTerms[0].matchFields[0].values"}},
		"update re-validates": {errs: ValidateResourceClassUpdate(class(func(c *resourcev1alpha2.ResourceClass) { c.DriverName = "" }), class(func(*resourcev1alpha2.ResourceClass) {})), want: []string{"driverName"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}

func classRef(kind, name string) *resourcev1alpha2.ResourceClassParametersReference {
	return &resourcev1alpha2.ResourceClassParametersReference{Kind: kind, Name: name}
}

func TestValidateResourceClaim(t *testing.T) {
	for name, tc := range map[string]struct {
		claim *resourcev1alpha2.ResourceClaim
		want  []string
	}{
		"valid":    {claim: makeClaim("c").obj()},
		"no class": {claim: makeClaim("c").with(func(c *resourcev1alpha2.ResourceClaim) { c.Spec.ResourceClassName = "" }).obj(), want: []string{"spec.resourceClassName: Required"}},
		"immediate": {claim: makeClaim("c").with(func(c *resourcev1alpha2.ResourceClaim) {
			c.Spec.AllocationMode = resourcev1alpha2.AllocationModeImmediate
		}).obj()},
		"bad mode":       {claim: makeClaim("c").with(func(c *resourcev1alpha2.ResourceClaim) { c.Spec.AllocationMode = "Later" }).obj(), want: []string{`spec.allocationMode: supported values: "WaitForFirstConsumer", "Immediate"`}},
		"params ok":      {claim: makeClaim("c").with(claimRef("CardParameters", "p")).obj()},
		"params no kind": {claim: makeClaim("c").with(claimRef("", "p")).obj(), want: []string{"spec.parametersRef.kind: Required"}},
		"params no name": {claim: makeClaim("c").with(claimRef("CardParameters", "")).obj(), want: []string{"spec.parametersRef.name: Required"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaim(tc.claim), tc.want...) })
	}
	c := makeClaim("c").obj()
	DefaultResourceClaim(c)
	if c.Spec.AllocationMode != resourcev1alpha2.AllocationModeWaitForFirstConsumer {
		t.Errorf("default allocationMode = %q", c.Spec.AllocationMode)
	}
	expectErrs(t, ValidateResourceClaimUpdate(makeClaim("c").with(func(c *resourcev1alpha2.ResourceClaim) { c.Spec.ResourceClassName = "other" }).obj(), makeClaim("c").obj()), "spec: field is immutable")
	expectErrs(t, ValidateResourceClaimUpdate(makeClaim("c").with(func(c *resourcev1alpha2.ResourceClaim) { c.Labels = map[string]string{"a": "b"} }).obj(), makeClaim("c").obj()))
}

func claimRef(kind, name string) func(*resourcev1alpha2.ResourceClaim) {
	return func(c *resourcev1alpha2.ResourceClaim) {
		c.Spec.ParametersRef = &resourcev1alpha2.ResourceClaimParametersReference{APIGroup: "dra.example.com", Kind: kind, Name: name}
	}
}

func TestValidateResourceClaimStatusUpdate(t *testing.T) {
	now := metav1.NewTime(time.Unix(100, 0))
	type claim = resourcev1alpha2.ResourceClaim
	for name, tc := range map[string]struct {
		old, new *claim
		want     []string
	}{
		"allocate":                 {old: makeClaim("c").obj(), new: makeClaim("c").allocated().obj()},
		"allocate and reserve":     {old: makeClaim("c").obj(), new: makeClaim("c").allocated().reservedFor("p1").obj()},
		"reserve without alloc":    {old: makeClaim("c").obj(), new: makeClaim("c").reservedFor("p1").obj(), want: []string{"status.reservedFor: may only be set while `allocation` is set"}},
		"no driver name":           {old: makeClaim("c").obj(), new: makeClaim("c").allocated().with(func(c *claim) { c.Status.DriverName = "" }).obj(), want: []string{"status.driverName: Required"}},
		"not shareable twice":      {old: makeClaim("c").allocated().obj(), new: makeClaim("c").allocated().reservedFor("p1", "p2").obj(), want: []string{"status.reservedFor: not shareable"}},
		"shareable twice":          {old: makeClaim("c").allocated().with(shareable).obj(), new: makeClaim("c").allocated().with(shareable).reservedFor("p1", "p2").obj()},
		"same uid twice":           {old: makeClaim("c").allocated().with(shareable).obj(), new: makeClaim("c").allocated().with(shareable).reservedFor("p1", "p1").obj(), want: []string{"status.reservedFor[1].uid: Duplicate"}},
		"reservation incomplete":   {old: makeClaim("c").allocated().obj(), new: makeClaim("c").allocated().with(incompleteReservation).obj(), want: []string{"status.reservedFor[0].resource: Required", "status.reservedFor[0].name: Required", "status.reservedFor[0].uid: Required"}},
		"too many reservations":    {old: makeClaim("c").allocated().with(shareable).obj(), new: makeClaim("c").allocated().with(shareable).reservedFor(names("p", 33)...).obj(), want: []string{"status.reservedFor: must have at most 32 items"}},
		"32 reservations":          {old: makeClaim("c").allocated().with(shareable).obj(), new: makeClaim("c").allocated().with(shareable).reservedFor(names("p", 32)...).obj()},
		"deallocate":               {old: makeClaim("c").allocated().obj(), new: makeClaim("c").obj()},
		"deallocate while in use":  {old: makeClaim("c").allocated().reservedFor("p1").obj(), new: makeClaim("c").reservedFor("p1").obj(), want: []string{"status.reservedFor: may only be set while `allocation` is set"}},
		"replace allocation":       {old: makeClaim("c").allocated().obj(), new: makeClaim("c").allocated().with(instanceID("gpu-1")).obj(), want: []string{"status.allocation: may not be replaced"}},
		"request deallocation":     {old: makeClaim("c").allocated().obj(), new: makeClaim("c").allocated().with(deallocate).obj()},
		"deallocation in use":      {old: makeClaim("c").allocated().reservedFor("p1").obj(), new: makeClaim("c").allocated().reservedFor("p1").with(deallocate).obj(), want: []string{"status.deallocationRequested: may not be set while `reservedFor` is not empty"}},
		"deallocation unallocated": {old: makeClaim("c").obj(), new: makeClaim("c").with(deallocate).obj(), want: []string{"status.deallocationRequested: may only be set while `allocation` is set"}},
		"deallocation cleared":     {old: makeClaim("c").allocated().with(deallocate).obj(), new: makeClaim("c").allocated().obj(), want: []string{"status.deallocationRequested: may not be cleared"}},
		"deallocation done":        {old: makeClaim("c").allocated().with(deallocate).obj(), new: makeClaim("c").obj()},
		"reserve while deleting": {
			old:  makeClaim("c").allocated().with(deletedAt(now)).obj(),
			new:  makeClaim("c").allocated().with(deletedAt(now)).reservedFor("p1").obj(),
			want: []string{"status.reservedFor[0]: new consumers may not be added"},
		},
		"unreserve while deleting": {old: makeClaim("c").allocated().with(deletedAt(now)).reservedFor("p1").obj(), new: makeClaim("c").allocated().with(deletedAt(now)).obj()},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimStatusUpdate(tc.new, tc.old), tc.want...) })
	}
}

func TestValidateResourceHandles(t *testing.T) {
	type claim = resourcev1alpha2.ResourceClaim
	handles := func(f func(h *resourcev1alpha2.ResourceHandle)) func(*claim) {
		return func(c *claim) { f(&c.Status.Allocation.ResourceHandles[0]) }
	}
	const h0 = "status.allocation.resourceHandles[0]"
	for name, tc := range map[string]struct {
		mutate func(*claim)
		want   []string
	}{
		"opaque data":           {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.StructuredData, h.Data = nil, "x" })},
		"neither":               {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.StructuredData = nil })},
		"data at 16 KiB":        {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.StructuredData, h.Data = nil, strings.Repeat("x", 16384) })},
		"data above 16 KiB":     {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.StructuredData, h.Data = nil, strings.Repeat("x", 16385) }), want: []string{h0 + ".data: may not be more than 16384 bytes"}},
		"data and structured":   {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.Data = "x" }), want: []string{h0 + ": may specify only one of: `data`, `structuredData`"}},
		"structured no model":   {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.StructuredData.Partitionable = nil }), want: []string{h0 + ".structuredData: must specify one of: `partitionable`"}},
		"instance id empty":     {mutate: instanceID(""), want: []string{h0 + ".structuredData.partitionable.instances[0].id: Required"}},
		"instance id twice":     {mutate: handles(dupInstance), want: []string{h0 + ".structuredData.partitionable.instances[1].id: Duplicate"}},
		"node name bad":         {mutate: handles(func(h *resourcev1alpha2.ResourceHandle) { h.StructuredData.NodeName = "Worker_1" }), want: []string{h0 + ".structuredData.nodeName"}},
		"too many handles":      {mutate: manyHandles(33), want: []string{"status.allocation.resourceHandles: must have at most 32 items"}},
		"32 handles":            {mutate: manyHandles(32)},
		"available nodes empty": {mutate: func(c *claim) { c.Status.Allocation.AvailableOnNodes = &corev1.NodeSelector{} }, want: []string{"status.allocation.availableOnNodes.nodeSelectorTerms: Required"}},
	} {
		t.Run(name, func(t *testing.T) {
			expectErrs(t, ValidateResourceClaimStatusUpdate(makeClaim("c").allocated().with(tc.mutate).obj(), makeClaim("c").obj()), tc.want...)
		})
	}
}

func shareable(c *resourcev1alpha2.ResourceClaim)  { c.Status.Allocation.Shareable = true }
func deallocate(c *resourcev1alpha2.ResourceClaim) { c.Status.DeallocationRequested = true }
func incompleteReservation(c *resourcev1alpha2.ResourceClaim) {
	c.Status.ReservedFor = []resourcev1alpha2.ResourceClaimConsumerReference{{}}
}
func dupInstance(h *resourcev1alpha2.ResourceHandle) {
	p := h.StructuredData.Partitionable
	p.Instances = append(p.Instances, p.Instances[0])
}

func deletedAt(ts metav1.Time) func(*resourcev1alpha2.ResourceClaim) {
	return func(c *resourcev1alpha2.ResourceClaim) { c.DeletionTimestamp = &ts }
}

func instanceID(id string) func(*resourcev1alpha2.ResourceClaim) {
	return func(c *resourcev1alpha2.ResourceClaim) {
		c.Status.Allocation.ResourceHandles[0].StructuredData.Partitionable.Instances[0].ID = id
	}
}

func manyHandles(n int) func(*resourcev1alpha2.ResourceClaim) {
	return func(c *resourcev1alpha2.ResourceClaim) {
		h := c.Status.Allocation.ResourceHandles[0]
		c.Status.Allocation.ResourceHandles = nil
		for range n {
			c.Status.Allocation.ResourceHandles = append(c.Status.Allocation.ResourceHandles, *h.DeepCopy())
		}
	}
}

func names(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s%d", prefix, i)
	}
	return out
}

func TestValidateResourceClaimTemplate(t *testing.T) {
	tmpl := func(f func(*resourcev1alpha2.ResourceClaimTemplate)) *resourcev1alpha2.ResourceClaimTemplate {
		t := &resourcev1alpha2.ResourceClaimTemplate{
			ObjectMeta: objMeta("gpu-template", "default"),
			Spec:       resourcev1alpha2.ResourceClaimTemplateSpec{Spec: resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu"}},
		}
		f(t)
		return t
	}
	none := func(*resourcev1alpha2.ResourceClaimTemplate) {}
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"valid":           {errs: ValidateResourceClaimTemplate(tmpl(none))},
		"no class":        {errs: ValidateResourceClaimTemplate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Spec.ResourceClassName = "" })), want: []string{"spec.spec.resourceClassName: Required"}},
		"bad mode":        {errs: ValidateResourceClaimTemplate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Spec.AllocationMode = "x" })), want: []string{"spec.spec.allocationMode"}},
		"bad claim label": {errs: ValidateResourceClaimTemplate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Labels = map[string]string{"a": "b c"} })), want: []string{"spec.metadata.labels"}},
		"spec immutable":  {errs: ValidateResourceClaimTemplateUpdate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Spec.ResourceClassName = "other" }), tmpl(none)), want: []string{"spec: field is immutable"}},
		"claim labels immutable": {errs: ValidateResourceClaimTemplateUpdate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Labels = map[string]string{"a": "b"} }), tmpl(none)),
			want: []string{"spec: field is immutable"}},
		// Seed 000: spec.metadata carries labels and annotations only.
		"claim labels and annotations": {errs: ValidateResourceClaimTemplate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) {
			t.Spec.Labels, t.Spec.Annotations = map[string]string{"a": "b"}, map[string]string{"c": "d"}
		}))},
		"claim name": {errs: ValidateResourceClaimTemplate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Name = "claim" })),
			want: []string{"spec.metadata.name: Forbidden: only `labels` and `annotations` may be set in a claim template's metadata"}},
		"claim metadata, several": {errs: ValidateResourceClaimTemplate(tmpl(func(t *resourcev1alpha2.ResourceClaimTemplate) {
			t.Spec.GenerateName, t.Spec.Namespace, t.Spec.Finalizers = "c-", "other", []string{"example.com/keep"}
			t.Spec.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "Pod", Name: "p", UID: "u"}}
		})), want: []string{"spec.metadata.generateName: Forbidden", "spec.metadata.namespace: Forbidden",
			"spec.metadata.finalizers: Forbidden", "spec.metadata.ownerReferences: Forbidden"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
	d := tmpl(none)
	DefaultResourceClaimTemplate(d)
	if d.Spec.Spec.AllocationMode != resourcev1alpha2.AllocationModeWaitForFirstConsumer {
		t.Errorf("template default allocationMode = %q", d.Spec.Spec.AllocationMode)
	}
}

// TestResourceClaimTemplateStoredBeforeMetadataRule: a template whose
// spec.metadata holds more than labels and annotations, stored before the
// rule, stays writable: its top-level metadata may change with the extra
// fields kept, and the extra fields may be dropped; none may be added or
// changed, and the rest of the spec stays immutable.
func TestResourceClaimTemplateStoredBeforeMetadataRule(t *testing.T) {
	stored := &resourcev1alpha2.ResourceClaimTemplate{
		ObjectMeta: objMeta("legacy", "default"),
		Spec: resourcev1alpha2.ResourceClaimTemplateSpec{
			ObjectMeta: metav1.ObjectMeta{Name: "claim", Finalizers: []string{"example.com/keep"}, Labels: map[string]string{"a": "b"}},
			Spec:       resourcev1alpha2.ResourceClaimSpec{ResourceClassName: "gpu", AllocationMode: resourcev1alpha2.AllocationModeWaitForFirstConsumer},
		},
	}
	expectErrs(t, ValidateResourceClaimTemplate(stored), "spec.metadata.name: Forbidden", "spec.metadata.finalizers: Forbidden")
	edit := func(f func(*resourcev1alpha2.ResourceClaimTemplate)) *resourcev1alpha2.ResourceClaimTemplate {
		t := stored.DeepCopy()
		f(t)
		return t
	}
	for name, tc := range map[string]struct {
		update *resourcev1alpha2.ResourceClaimTemplate
		want   []string
	}{
		"relabeled, extra fields kept": {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Labels = map[string]string{"team": "x"} })},
		"fixed":                        {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Name, t.Spec.Finalizers = "", nil })},
		"one dropped":                  {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Name = "" })},
		"one changed": {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Name = "other" }),
			want: []string{"spec.metadata.name: Forbidden"}},
		"one added": {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Name, t.Spec.GenerateName = "", "c-" }),
			want: []string{"spec.metadata.generateName: Forbidden"}},
		"claim labels changed": {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Name, t.Spec.Labels = "", nil }),
			want: []string{"spec: field is immutable"}},
		"claim spec changed": {update: edit(func(t *resourcev1alpha2.ResourceClaimTemplate) { t.Spec.Spec.ResourceClassName = "other" }),
			want: []string{"spec: field is immutable"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, ValidateResourceClaimTemplateUpdate(tc.update, stored), tc.want...) })
	}
}

func TestValidatePodSchedulingContext(t *testing.T) {
	type psc = resourcev1alpha2.PodSchedulingContext
	ctx := func(f func(*psc)) *psc {
		c := &psc{ObjectMeta: objMeta("web", "default"), Spec: resourcev1alpha2.PodSchedulingContextSpec{SelectedNode: "worker-1", PotentialNodes: []string{"worker-1", "worker-2"}}}
		f(c)
		return c
	}
	none := func(*psc) {}
	unsuitable := func(claim string, nodes ...string) func(*psc) {
		return func(c *psc) {
			c.Status.ResourceClaims = append(c.Status.ResourceClaims, resourcev1alpha2.ResourceClaimSchedulingStatus{Name: claim, UnsuitableNodes: nodes})
		}
	}
	for name, tc := range map[string]struct {
		errs field.ErrorList
		want []string
	}{
		"valid":               {errs: ValidatePodSchedulingContext(ctx(none))},
		"128 nodes":           {errs: ValidatePodSchedulingContext(ctx(func(c *psc) { c.Spec.PotentialNodes = names("n", 128) }))},
		"129 nodes":           {errs: ValidatePodSchedulingContext(ctx(func(c *psc) { c.Spec.PotentialNodes = names("n", 129) })), want: []string{"spec.potentialNodes: must have at most 128 items"}},
		"duplicate node":      {errs: ValidatePodSchedulingContext(ctx(func(c *psc) { c.Spec.PotentialNodes = []string{"a", "a"} })), want: []string{"spec.potentialNodes[1]: Duplicate"}},
		"bad node":            {errs: ValidatePodSchedulingContext(ctx(func(c *psc) { c.Spec.PotentialNodes = []string{"A_1"} })), want: []string{"spec.potentialNodes[0]"}},
		"bad selected node":   {errs: ValidatePodSchedulingContext(ctx(func(c *psc) { c.Spec.SelectedNode = "A_1" })), want: []string{"spec.selectedNode"}},
		"status ok":           {errs: ValidatePodSchedulingContextStatusUpdate(ctx(unsuitable("gpu", "worker-2")), ctx(none))},
		"status claim twice":  {errs: ValidatePodSchedulingContextStatusUpdate(ctx(func(c *psc) { unsuitable("gpu")(c); unsuitable("gpu")(c) }), ctx(none)), want: []string{"status.resourceClaims[1].name: Duplicate"}},
		"status no name":      {errs: ValidatePodSchedulingContextStatusUpdate(ctx(unsuitable("")), ctx(none)), want: []string{"status.resourceClaims[0].name: Required"}},
		"status 129 nodes":    {errs: ValidatePodSchedulingContextStatusUpdate(ctx(unsuitable("gpu", names("n", 129)...)), ctx(none)), want: []string{"status.resourceClaims[0].unsuitableNodes: must have at most 128 items"}},
		"spec update":         {errs: ValidatePodSchedulingContextUpdate(ctx(func(c *psc) { c.Spec.SelectedNode = "worker-2" }), ctx(none))},
		"spec update invalid": {errs: ValidatePodSchedulingContextUpdate(ctx(func(c *psc) { c.Spec.PotentialNodes = names("n", 129) }), ctx(none)), want: []string{"spec.potentialNodes"}},
	} {
		t.Run(name, func(t *testing.T) { expectErrs(t, tc.errs, tc.want...) })
	}
}
