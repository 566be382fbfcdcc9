package gc

import (
	"context"
	"errors"
	"fmt"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
)

// processForeground carries out the foreground deletion of an owner: every
// dependent is handed to the check queue (where, its owner waiting, it is
// deleted or loses the reference), and once no dependent blocks the
// owner's deletion the finalizer goes and the server deletes the owner.
// Removal events of the dependents bring the owner back here.
func (c *Collector) processForeground(ctx context.Context, ref objectRef, live *metav1.PartialObjectMetadata) error {
	blocking := 0
	for _, d := range c.graph.dependentsOf(ref.UID) {
		if d.blocking {
			blocking++
		}
		if !d.deleting {
			c.check.Add(d.ref)
		}
	}
	if blocking > 0 {
		c.log.Debug("owner waits for its dependents", "owner", ref, "blocking", blocking)
		return nil
	}
	c.log.Info("dependents are gone; finishing foreground deletion", "owner", ref)
	return c.removeFinalizer(ctx, ref, live, finalizerForeground)
}

// syncOrphan carries out the orphan propagation of an owner: its reference
// is removed from every dependent, then the "orphan" finalizer from the
// owner (and the server deletes the owner).
func (c *Collector) syncOrphan(ctx context.Context, ref objectRef) error {
	live, err := c.getLive(ctx, ref)
	if err != nil || live == nil {
		return err
	}
	if live.DeletionTimestamp == nil || !slices.Contains(live.Finalizers, finalizerOrphan) {
		return nil
	}
	var errs []error
	for _, d := range c.graph.dependentsOf(ref.UID) {
		if err := c.orphanDependent(ctx, d.ref, ref.UID); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("orphan dependents of %s: %w", ref, err)
	}
	c.log.Info("dependents orphaned", "owner", ref)
	return c.removeFinalizer(ctx, ref, live, finalizerOrphan)
}

// orphanDependent removes the references to owner from one dependent.
func (c *Collector) orphanDependent(ctx context.Context, dep objectRef, owner types.UID) error {
	live, err := c.getLive(ctx, dep)
	if err != nil || live == nil {
		return err
	}
	if !hasOwner(live.OwnerReferences, owner) {
		return nil
	}
	return c.removeOwnerRefs(ctx, dep, live, []types.UID{owner})
}
