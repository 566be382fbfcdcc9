package devicetainteviction

import (
	"context"
	"fmt"
	"slices"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	corev1 "allot.dev/allot/api/core/v1"
)

// syncRule keeps a DeviceTaintRule's EvictionInProgress condition, at
// most once per StatusPeriod while the rule's spec stays the same.
func (d *Controller) syncRule(ctx context.Context, name string) error {
	rule, err := d.rules.Lister().Get("", name)
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err
	}
	if rule.DeletionTimestamp != nil {
		return nil
	}
	now := d.opts.Now()
	i := slices.IndexFunc(rule.Status.Conditions, func(c metav1.Condition) bool {
		return c.Type == resourcev1.DeviceTaintConditionEvictionInProgress
	})
	if i >= 0 {
		old := rule.Status.Conditions[i]
		if since := now.Sub(old.LastTransitionTime.Time); old.ObservedGeneration == rule.Generation && since < d.opts.StatusPeriod {
			d.ruleQ.AddAfter(name, d.opts.StatusPeriod-since)
			return nil
		}
	}
	cond := d.ruleCondition(rule)
	if i >= 0 {
		old := rule.Status.Conditions[i]
		cond.LastTransitionTime = old.LastTransitionTime
		if old == cond {
			return nil
		}
	}
	cond.LastTransitionTime = metav1.NewTime(now)
	next := rule.DeepCopy()
	if i >= 0 {
		next.Status.Conditions[i] = cond
	} else {
		next.Status.Conditions = append(next.Status.Conditions, cond)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if _, err := d.c.DeviceTaintRules().UpdateStatus(cctx, next); err != nil {
		if apierrors.IsNotFound(err) {
			return nil
		}
		return fmt.Errorf("update status of DeviceTaintRule %s: %w", name, err)
	}
	return nil
}

// ruleCondition is the EvictionInProgress condition for the rule now,
// worded as Kubernetes' controller words it.
func (d *Controller) ruleCondition(rule *resourcev1.DeviceTaintRule) metav1.Condition {
	cond := metav1.Condition{Type: resourcev1.DeviceTaintConditionEvictionInProgress, Status: metav1.ConditionFalse,
		ObservedGeneration: rule.Generation}
	d.mu.Lock()
	evicted := d.evicted[rule.UID]
	d.mu.Unlock()
	switch rule.Spec.Taint.Effect {
	case resourcev1.DeviceTaintEffectNoExecute:
		pods, namespaces := d.pendingFor(rule.UID)
		switch {
		case pods > 0:
			cond.Status, cond.Reason = metav1.ConditionTrue, "PodsPendingEviction"
			cond.Message = fmt.Sprintf("%s to be evicted in %s.", plural(pods, "pod needs", "pods need"), plural(namespaces, "namespace", "different namespaces"))
		case evicted > 0:
			cond.Reason = "Completed"
		default:
			cond.Reason = "NotStarted"
		}
	case resourcev1.DeviceTaintEffectNone:
		cond.Reason = "NoEffect"
		published, allocated, pods, namespaces := d.simulate(rule)
		cond.Message = fmt.Sprintf("%s selected. %s selected. %s in %s if the effect was NoExecute. "+
			"This information will not be updated again. Recreate the DeviceTaintRule to trigger an update.",
			plural(published, "published device", "published devices"), plural(allocated, "allocated device", "allocated devices"),
			plural(pods, "pod would be evicted", "pods would be evicted"), plural(namespaces, "namespace", "different namespaces"))
	default:
		cond.Reason = "OtherEffect"
		cond.Message = "Eviction only happens for the NoExecute effect."
	}
	if evicted > 0 {
		if cond.Message != "" {
			cond.Message += " "
		}
		cond.Message += plural(evicted, "pod", "pods") + " evicted since starting the controller."
	}
	return cond
}

// plural writes "1 pod" or "3 pods".
func plural(n int64, one, many string) string {
	if n == 1 {
		return "1 " + one
	}
	return fmt.Sprintf("%d %s", n, many)
}

// pendingFor counts the pods, and their namespaces, whose pending
// eviction the rule causes.
func (d *Controller) pendingFor(uid types.UID) (pods, namespaces int64) {
	d.mu.Lock()
	defer d.mu.Unlock()
	ns := map[string]bool{}
	for _, p := range d.pending {
		if p.due.HasRule(uid) {
			pods++
			ns[p.pod.Namespace] = true
		}
	}
	return pods, int64(len(ns))
}

// simulate counts what a rule of effect None would do with NoExecute:
// the published devices it selects (newest pool generations), the
// allocated ones, and the pods it would evict and their namespaces.
func (d *Controller) simulate(rule *resourcev1.DeviceTaintRule) (published, allocated, pods, namespaces int64) {
	newest := map[string]int64{}
	all, _ := d.slices.Lister().List(everything)
	for _, s := range all {
		k := poolKey(s.Spec.Driver, s.Spec.Pool.Name)
		if g, ok := newest[k]; !ok || s.Spec.Pool.Generation > g {
			newest[k] = s.Spec.Pool.Generation
		}
	}
	for _, s := range all {
		if s.Spec.Pool.Generation != newest[poolKey(s.Spec.Driver, s.Spec.Pool.Name)] {
			continue
		}
		for _, dev := range s.Spec.Devices {
			if ruleSelects(rule, s.Spec.Driver, s.Spec.Pool.Name, dev.Name) {
				published++
			}
		}
	}
	evict := rule.DeepCopy()
	evict.Spec.Taint.Effect = resourcev1.DeviceTaintEffectNoExecute
	taints := d.taintsOf(evict)
	podSet := map[types.NamespacedName]bool{}
	consider := func(uses []DeviceUse, reserved []types.NamespacedName) {
		for _, u := range uses {
			if useSelected(rule, u) {
				allocated++
			}
		}
		if !selectsAny([]*resourcev1.DeviceTaintRule{rule}, uses) {
			return
		}
		for _, p := range reserved {
			podSet[p] = true
		}
	}
	v1claims, _ := d.claimsV1.Lister().List(everything)
	for _, c := range v1claims {
		consider(usesV1(c), reservedForV1(c))
	}
	seed, _ := d.claims.Lister().List(everything)
	for _, c := range seed {
		consider(usesSeed(c), reservedForSeed(c))
	}
	ns := map[string]bool{}
	for key := range podSet {
		pod, err := d.pods.Lister().Get(key.Namespace, key.Name)
		if err != nil || pod.DeletionTimestamp != nil || pod.Status.Phase == corev1.PodSucceeded || pod.Status.Phase == corev1.PodFailed {
			continue
		}
		uses, err := d.podUses(pod)
		if err != nil {
			continue
		}
		if due, ok := EvictionTime(uses, taints, d.opts.Now()); ok && due.HasRule(evict.UID) {
			pods++
			ns[pod.Namespace] = true
		}
	}
	return published, allocated, pods, int64(len(ns))
}
