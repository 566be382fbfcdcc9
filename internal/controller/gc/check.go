package gc

import (
	"context"
	"fmt"
	"slices"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// ownerState is what a live read says of one owner reference.
type ownerState int

const (
	// ownerSolid exists and is not waiting for its dependents.
	ownerSolid ownerState = iota
	// ownerDangling does not exist (or a different object has its name).
	ownerDangling
	// ownerWaiting exists and is being deleted in the foreground.
	ownerWaiting
)

// syncCheck judges one object: as a dependent against its owners, and as
// an owner in foreground deletion against its dependents.
func (c *Collector) syncCheck(ctx context.Context, ref objectRef) error {
	if c.graph.settled(ref.UID) {
		return nil // the usual case at start-up: the owners arrived later
	}
	live, err := c.getLive(ctx, ref)
	if err != nil || live == nil {
		return err
	}
	if live.DeletionTimestamp != nil {
		if slices.Contains(live.Finalizers, finalizerForeground) {
			return c.processForeground(ctx, ref, live)
		}
		return nil // its deletion is under way
	}
	return c.checkOwners(ctx, ref, live)
}

// getLive reads the object behind ref. It returns nil when the object is
// gone or its name now belongs to another object.
func (c *Collector) getLive(ctx context.Context, ref objectRef) (*metav1.PartialObjectMetadata, error) {
	obj, err := c.meta.Resource(ref.GVR).Namespace(ref.Namespace).Get(ctx, ref.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		return nil, nil
	}
	if err != nil {
		return nil, fmt.Errorf("get %s: %w", ref, err)
	}
	if obj.UID != ref.UID {
		return nil, nil
	}
	return obj, nil
}

// checkOwners deletes the object when none of its owners exists (or every
// existing one waits for it), or drops the references to the gone and
// waiting owners when another owner still exists.
func (c *Collector) checkOwners(ctx context.Context, ref objectRef, live *metav1.PartialObjectMetadata) error {
	if len(live.OwnerReferences) == 0 {
		return nil
	}
	var solid int
	var drop []types.UID
	var waiting bool
	for _, o := range live.OwnerReferences {
		st, err := c.ownerStateOf(ctx, live, o)
		if err != nil {
			return fmt.Errorf("check owner %s %s of %s: %w", o.Kind, o.Name, ref, err)
		}
		switch st {
		case ownerSolid:
			solid++
		case ownerWaiting:
			waiting = true
			drop = append(drop, o.UID)
		case ownerDangling:
			drop = append(drop, o.UID)
		}
	}
	switch {
	case solid > 0 && len(drop) == 0:
		return nil
	case solid > 0:
		c.log.Info("removing references to gone owners", "object", ref, "owners", drop)
		return c.removeOwnerRefs(ctx, ref, live, drop)
	case waiting && c.graph.hasDependents(ref.UID):
		c.log.Info("deleting dependent of an owner in foreground deletion, in the foreground", "object", ref)
		return c.deleteObject(ctx, ref, live, metav1.DeletePropagationForeground)
	case waiting:
		c.log.Info("deleting dependent of an owner in foreground deletion", "object", ref)
		return c.deleteObject(ctx, ref, live, metav1.DeletePropagationBackground)
	default:
		c.log.Info("deleting dependent whose owners are gone", "object", ref)
		return c.deleteObject(ctx, ref, live, metav1.DeletePropagationBackground)
	}
}

// ownerStateOf reads one owner of dep. An owner observed in the cache and
// not being deleted is solid without a read: the cache is trusted to keep
// objects, never to drop them.
func (c *Collector) ownerStateOf(ctx context.Context, dep *metav1.PartialObjectMetadata, o metav1.OwnerReference) (ownerState, error) {
	if c.graph.present(o.UID) {
		return ownerSolid, nil
	}
	if o.UID == "" {
		// Validation requires a uid; without one nothing proves the owner
		// gone, so the reference is left alone.
		return ownerSolid, nil
	}
	res, err := c.kinds.lookup(o.APIVersion, o.Kind)
	if err != nil {
		return ownerSolid, err
	}
	ns := ""
	if res.Namespaced {
		if dep.Namespace == "" {
			// A cluster-scoped object cannot name a namespaced owner:
			// the reference is unresolvable, so it never collects.
			c.log.Warn("cluster-scoped object has a namespaced owner; ignoring the reference", "object", dep.Name, "owner", o.Name)
			return ownerSolid, nil
		}
		ns = dep.Namespace
	}
	owner, err := c.meta.Resource(res.GVR).Namespace(ns).Get(ctx, o.Name, metav1.GetOptions{})
	switch {
	case apierrors.IsNotFound(err):
		return ownerDangling, nil
	case err != nil:
		return ownerSolid, fmt.Errorf("get owner: %w", err)
	case owner.UID != o.UID:
		return ownerDangling, nil
	case owner.DeletionTimestamp != nil && slices.Contains(owner.Finalizers, finalizerForeground):
		return ownerWaiting, nil
	}
	return ownerSolid, nil
}
