package integration

import (
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler"
)

// fakeDriver plays a driver's controller (seed 003) for one class in the
// test's namespace, polling claims and PodSchedulingContexts with the
// admin client: it allocates Immediate claims on immediateNodes, answers
// contexts with the potential nodes its unsuitable func rejects,
// allocates and reserves for a selected node, and deallocates claims
// whose deallocation was requested or that are being deleted.
type fakeDriver struct {
	e              *env
	class          string
	immediateNodes []string
	unsuitable     func(claim, node string) bool // full node names; nil: every node suits
	silent         bool                          // never answer contexts nor allocate

	mu           sync.Mutex
	seen         []resourceapi.PodSchedulingContext // contexts as first seen with a selected node
	deallocated  []string                           // claims deallocated on request
	maxPotential int
}

func (d *fakeDriver) finalizer() string { return d.class + ".example.com/deletion-protection" }

// start creates the class and runs the driver until the test ends.
func (d *fakeDriver) start(mutate func(*resourceapi.ResourceClass)) *fakeDriver {
	d.createClass(mutate)
	d.run()
	return d
}

// createClass creates the driver's class (controllerName and driverName
// are the class name plus .example.com, suitableNodes the test's pool),
// deleted when the test ends.
func (d *fakeDriver) createClass(mutate func(*resourceapi.ResourceClass)) {
	e := d.e
	e.t.Helper()
	cls := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: d.class}, DriverName: d.class + ".example.com", ControllerName: d.class + ".example.com",
		SuitableNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchExpressions: []corev1.NodeSelectorRequirement{
			{Key: poolLabel, Operator: corev1.NodeSelectorOpIn, Values: []string{"fabric"}}}}}}}
	if mutate != nil {
		mutate(cls)
	}
	must(e.t, "create class", func() error { _, err := e.c.ResourceClasses().Create(callCtx(e.t), cls); return err })
	e.t.Cleanup(func() {
		c, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = e.c.ResourceClasses().Delete(c, cls.Name, metav1.DeleteOptions{})
	})
}

// run polls until the test ends.
func (d *fakeDriver) run() {
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ctx.Err() == nil {
			d.pass(ctx)
			time.Sleep(20 * time.Millisecond)
		}
	}()
	d.e.t.Cleanup(func() {
		cancel()
		<-done
	})
}

// pass handles every claim and context once; API errors (conflicts with
// the scheduler) are retried on the next pass.
func (d *fakeDriver) pass(ctx context.Context) {
	if d.silent {
		return
	}
	e := d.e
	claims, err := e.c.ResourceClaims(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range claims.Items {
		c := &claims.Items[i]
		if c.Spec.ResourceClassName != d.class {
			continue
		}
		switch {
		case (c.DeletionTimestamp != nil || c.Status.DeallocationRequested) && len(c.Status.ReservedFor) == 0:
			d.deallocate(ctx, c)
		case c.Spec.AllocationMode == resourceapi.AllocationModeImmediate && c.Status.Allocation == nil && c.DeletionTimestamp == nil:
			d.allocate(ctx, c, d.immediateNodes, nil)
		}
	}
	scs, err := e.c.PodSchedulingContexts(e.ns).List(ctx, metav1.ListOptions{})
	if err != nil {
		return
	}
	for i := range scs.Items {
		d.negotiate(ctx, &scs.Items[i], claims.Items)
	}
}

func (d *fakeDriver) allocate(ctx context.Context, c *resourceapi.ResourceClaim, nodes []string, pod *corev1.Pod) {
	if !slices.Contains(c.Finalizers, d.finalizer()) {
		c.Finalizers = append(c.Finalizers, d.finalizer())
		var err error
		if c, err = d.e.c.ResourceClaims(c.Namespace).Update(ctx, c); err != nil {
			return
		}
	}
	c.Status.DriverName, c.Status.ControllerName = d.class+".example.com", d.class+".example.com"
	c.Status.Allocation = &resourceapi.AllocationResult{
		ResourceHandles: []resourceapi.ResourceHandle{{DriverName: d.class + ".example.com", Data: "port-7"}},
		AvailableOnNodes: &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{{MatchFields: []corev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: corev1.NodeSelectorOpIn, Values: nodes}}}}},
	}
	if pod != nil {
		c.Status.ReservedFor = append(c.Status.ReservedFor, resourceapi.ResourceClaimConsumerReference{Resource: "pods", Name: pod.Name, UID: pod.UID})
	}
	_, _ = d.e.c.ResourceClaims(c.Namespace).UpdateStatus(ctx, c)
}

func (d *fakeDriver) deallocate(ctx context.Context, c *resourceapi.ResourceClaim) {
	if c.Status.Allocation != nil {
		requested := c.Status.DeallocationRequested
		c.Status.Allocation, c.Status.DeallocationRequested = nil, false
		c.Status.DriverName, c.Status.ControllerName = "", ""
		var err error
		if c, err = d.e.c.ResourceClaims(c.Namespace).UpdateStatus(ctx, c); err != nil {
			return
		}
		if requested {
			d.mu.Lock()
			d.deallocated = append(d.deallocated, c.Name)
			d.mu.Unlock()
		}
	}
	if i := slices.Index(c.Finalizers, d.finalizer()); i >= 0 {
		c.Finalizers = slices.Delete(c.Finalizers, i, i+1)
		_, _ = d.e.c.ResourceClaims(c.Namespace).Update(ctx, c)
	}
}

// negotiate answers one context for the pod's pending claims of the
// class, or allocates them for the selected node.
func (d *fakeDriver) negotiate(ctx context.Context, sc *resourceapi.PodSchedulingContext, claims []resourceapi.ResourceClaim) {
	pod, err := d.e.c.Pods(sc.Namespace).Get(ctx, sc.Name)
	if err != nil || pod.DeletionTimestamp != nil || !slices.ContainsFunc(sc.OwnerReferences, func(r metav1.OwnerReference) bool { return r.UID == pod.UID }) {
		return // orphaned: the pod is gone
	}
	d.mu.Lock()
	d.maxPotential = max(d.maxPotential, len(sc.Spec.PotentialNodes))
	if sc.Spec.SelectedNode != "" {
		d.seen = append(d.seen, *sc.DeepCopy())
	}
	d.mu.Unlock()
	upd := sc.DeepCopy()
	changed := false
	for _, pc := range pod.Spec.ResourceClaims {
		c := podClaim(pod, pc, claims)
		if c == nil || c.Spec.ResourceClassName != d.class || c.Status.Allocation != nil || c.Spec.AllocationMode == resourceapi.AllocationModeImmediate {
			continue
		}
		sel := sc.Spec.SelectedNode
		if sel != "" && !d.unsuitableNode(c.Name, sel) {
			d.allocate(ctx, c.DeepCopy(), []string{sel}, pod)
			continue
		}
		var prev []string
		i := slices.IndexFunc(upd.Status.ResourceClaims, func(s resourceapi.ResourceClaimSchedulingStatus) bool { return s.Name == pc.Name })
		if i >= 0 {
			prev = upd.Status.ResourceClaims[i].UnsuitableNodes
		}
		var bad []string
		for _, n := range append(append(slices.Clone(sc.Spec.PotentialNodes), prev...), sel) {
			if n != "" && !slices.Contains(bad, n) && d.unsuitableNode(c.Name, n) {
				bad = append(bad, n)
			}
		}
		slices.Sort(bad)
		entry := resourceapi.ResourceClaimSchedulingStatus{Name: pc.Name, UnsuitableNodes: bad}
		switch {
		case i < 0:
			upd.Status.ResourceClaims = append(upd.Status.ResourceClaims, entry)
			changed = true
		case !slices.Equal(prev, bad):
			upd.Status.ResourceClaims[i] = entry
			changed = true
		}
	}
	if changed {
		if _, err := d.e.c.PodSchedulingContexts(sc.Namespace).UpdateStatus(ctx, upd); err != nil && !apierrors.IsConflict(err) {
			d.e.t.Logf("fake driver %s: update context: %v", d.class, err)
		}
	}
}

func (d *fakeDriver) unsuitableNode(claim, node string) bool {
	return d.unsuitable != nil && d.unsuitable(claim, node)
}

// podClaim finds the claim of a pod's entry among claims.
func podClaim(pod *corev1.Pod, pc corev1.PodResourceClaim, claims []resourceapi.ResourceClaim) *resourceapi.ResourceClaim {
	name := ""
	if pc.ResourceClaimName != nil {
		name = *pc.ResourceClaimName
	}
	for _, st := range pod.Status.ResourceClaimStatuses {
		if st.Name == pc.Name && st.ResourceClaimName != nil {
			name = *st.ResourceClaimName
		}
	}
	for i := range claims {
		if claims[i].Name == name {
			return &claims[i]
		}
	}
	return nil
}

// createCPClaim creates a claim of a fake driver's class.
func (e *env) createCPClaim(name, class string, mode resourceapi.AllocationMode) {
	e.t.Helper()
	c := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: e.ns},
		Spec: resourceapi.ResourceClaimSpec{ResourceClassName: class, AllocationMode: mode}}
	must(e.t, "create claim "+name, func() error { _, err := e.c.ResourceClaims(e.ns).Create(callCtx(e.t), c); return err })
}

// getClaim reads a claim.
func (e *env) getClaim(name string) *resourceapi.ResourceClaim {
	e.t.Helper()
	c, err := e.c.ResourceClaims(e.ns).Get(callCtx(e.t), name)
	if err != nil {
		e.t.Fatalf("get claim %s: %v", name, err)
	}
	return c
}

// waitMessage waits for PodScheduled=False whose message contains text.
func (e *env) waitMessage(pod, text string) string {
	e.t.Helper()
	var msg string
	e.eventually("pod "+pod+" to say "+text, func() bool {
		c := scheduler.PodScheduledCondition(e.getPod(pod))
		if c == nil || c.Status != corev1.ConditionFalse {
			return false
		}
		msg = c.Message
		return strings.Contains(msg, text)
	})
	return msg
}
