package dra

import (
	"fmt"
	"strconv"
	"strings"
	"sync"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	toolscache "k8s.io/client-go/tools/cache"

	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/plugins/dynamicresources"
	"allot.dev/allot/pkg/client"
	resourcev1 "k8s.io/api/resource/v1"
)

// source builds the DynamicResources plugin's snapshot extension from
// the informers. It rebuilds only after an event (its own handlers, and
// the scheduler's forwarding handlers, which mark it stale before they
// move pods); the fence revision is the highest claim resourceVersion the
// handlers have seen, read before the stores are read, so what is read is
// complete up to it (a handler that lags the store only lowers the fence:
// at worst a 409 and a retry). TestFenceIsReadBeforeTheStores pins it.
//
// Claim events of both versions, the common ones, are applied to the last
// Objects claim by claim; any other event lists everything again. Both handlers of the
// claims informer record every claim they see, in event order, so every
// claim event up to the fence has been recorded when the fence is read.
type source struct {
	Listers // what it reads
	// V1 are the resource.k8s.io/v1 listers and the namespaces (for the
	// admin-access label); nil without v1 informers (UseListers).
	V1 *V1Listers

	// building serializes objects(): an update applies its claims to the
	// Objects the previous call built.
	building sync.Mutex

	mu      sync.Mutex
	dirty   bool                // list everything again
	changed map[string]struct{} // claims (namespace/name) with events since cur
	// changedV1 are the resource.k8s.io/v1 claims with events since cur.
	changedV1 map[string]struct{}
	maxRev    uint64
	cur       *dynamicresources.Objects
	// written are the scheduler's own PodSchedulingContext writes, by
	// namespace/name, until the informer shows them: the next cycle must
	// not write the same decision again from a stale copy.
	written map[string]*resourcev1alpha2.PodSchedulingContext
}

// generatedIndex indexes claims by the "podUID/entry" they were generated
// for (resourcev1alpha2.GeneratedFor), for the queue's gate.
const generatedIndex = "allot.dev/generated-for"

func generatedKeys(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1alpha2.ResourceClaim)
	if !ok {
		return nil, nil
	}
	if k := dynamicresources.GeneratedKey(c); k != "" {
		return []string{k}, nil
	}
	return nil, nil
}

// generatedFor reports whether the claim informer has a claim generated
// for the entry of the pod with that UID.
func (d *source) generatedFor(podUID types.UID, entry string) bool {
	objs, err := d.Claims.ByIndex(generatedIndex, dynamicresources.EntryKey(podUID, entry))
	return err == nil && len(objs) > 0
}

// newSource subscribes to the DRA informers of f.
func newSource(f *client.Factory) (*source, error) {
	claims, slices, classes := f.ResourceClaims(), f.NodeResourceSlices(), f.ResourceClasses()
	if err := claims.AddIndexers(toolscache.Indexers{generatedIndex: generatedKeys}); err != nil {
		return nil, fmt.Errorf("index claims: %w", err)
	}
	classParams, claimParams := f.ResourceClassParameters(), f.ResourceClaimParameters()
	contexts := f.PodSchedulingContexts()
	d := &source{
		Listers: Listers{Claims: claims.Lister(), Slices: slices.Lister(), Classes: classes.Lister(),
			ClassParameters: classParams.Lister(), ClaimParameters: claimParams.Lister(), Contexts: contexts.Lister()},
		dirty:   true,
		changed: map[string]struct{}{}, changedV1: map[string]struct{}{}, written: map[string]*resourcev1alpha2.PodSchedulingContext{},
	}
	v1claims := f.ResourceClaimsV1()
	if err := v1claims.AddIndexers(toolscache.Indexers{generatedIndex: generatedKeysV1}); err != nil {
		return nil, fmt.Errorf("index v1 claims: %w", err)
	}
	v1slices, deviceClasses, namespaces, taintRules := f.ResourceSlices(), f.DeviceClasses(), f.Namespaces(), f.DeviceTaintRules()
	rules := taintRules.Lister()
	d.V1 = &V1Listers{Claims: v1claims.Lister(), Slices: v1slices.Lister(), Classes: deviceClasses.Lister(), Namespaces: namespaces.Lister(),
		TaintRules: &rules}
	if _, err := v1claims.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.touchV1(o) },
		UpdateFunc: func(_, o any) { d.touchV1(o) },
		DeleteFunc: func(o any) { d.touchV1(untomb(o)) },
	}); err != nil {
		return nil, fmt.Errorf("register DRA event handler: %w", err)
	}
	for _, inf := range []toolscache.SharedIndexInformer{slices, classes, classParams, claimParams, contexts,
		v1slices.SharedIndexInformer, deviceClasses.SharedIndexInformer, namespaces.SharedIndexInformer, taintRules.SharedIndexInformer} {
		if _, err := inf.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
			AddFunc:    func(any) { d.touch(nil) },
			UpdateFunc: func(any, any) { d.touch(nil) },
			DeleteFunc: func(any) { d.touch(nil) },
		}); err != nil {
			return nil, fmt.Errorf("register DRA event handler: %w", err)
		}
	}
	if _, err := claims.AddEventHandler(toolscache.ResourceEventHandlerFuncs{
		AddFunc:    func(o any) { d.touch(o) },
		UpdateFunc: func(_, o any) { d.touch(o) },
		DeleteFunc: func(o any) { d.touch(untomb(o)) },
	}); err != nil {
		return nil, fmt.Errorf("register DRA event handler: %w", err)
	}
	return d, nil
}

// touch records a claim's event (its key and resourceVersion), or, for
// any other object (nil), marks everything stale.
func (d *source) touch(claim any) { d.record(&d.changed, claim) }

// touchV1 records a v1 claim's event, as touch does for v1alpha2 claims.
func (d *source) touchV1(claim any) { d.record(&d.changedV1, claim) }

// record adds a claim's key to *set and raises the fence to its
// resourceVersion; an object without metadata marks everything stale.
func (d *source) record(set *map[string]struct{}, claim any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	m, err := meta.Accessor(claim)
	if claim == nil || err != nil {
		d.dirty = true
		return
	}
	if *set == nil {
		*set = map[string]struct{}{}
	}
	(*set)[m.GetNamespace()+"/"+m.GetName()] = struct{}{}
	if rv, err := strconv.ParseUint(m.GetResourceVersion(), 10, 64); err == nil && rv > d.maxRev {
		d.maxRev = rv
	}
}

// generatedFor reports whether either claim informer has a claim
// generated for the entry of the pod with that UID.
func (d *source) generatedForAny(podUID types.UID, entry string) bool {
	if d.generatedFor(podUID, entry) {
		return true
	}
	if d.V1 == nil {
		return false
	}
	objs, err := d.V1.Claims.ByIndex(generatedIndex, dynamicresources.EntryKey(podUID, entry))
	return err == nil && len(objs) > 0
}

func generatedKeysV1(obj any) ([]string, error) {
	c, ok := obj.(*resourcev1.ResourceClaim)
	if !ok {
		return nil, nil
	}
	if k := dynamicresources.V1GeneratedKey(c); k != "" {
		return []string{k}, nil
	}
	return nil, nil
}

// objects returns the current extension, updating it after events.
func (d *source) objects() (*dynamicresources.Objects, error) {
	d.building.Lock()
	defer d.building.Unlock()
	d.mu.Lock()
	prev, full, changed, changedV1 := d.cur, d.dirty || d.cur == nil, d.changed, d.changedV1
	if !full && len(changed) == 0 && len(changedV1) == 0 {
		d.mu.Unlock()
		return prev, nil
	}
	d.dirty, d.changed, d.changedV1 = false, map[string]struct{}{}, map[string]struct{}{}
	rev := strconv.FormatUint(d.maxRev, 10)
	d.mu.Unlock()
	var objs *dynamicresources.Objects
	var err error
	if full {
		objs, err = d.list(prev, rev)
	} else {
		objs, err = d.update(prev, rev, changed, changedV1)
	}
	if err != nil {
		d.touch(nil)
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	d.cur = objs
	return objs, nil
}

// update applies the changed claims of both versions, as the claims
// informers now hold them, to prev.
func (d *source) update(prev *dynamicresources.Objects, rev string, changed, changedV1 map[string]struct{}) (*dynamicresources.Objects, error) {
	upd, err := readChanged(changed, d.Claims.Get)
	if err != nil {
		return nil, err
	}
	if d.V1 == nil {
		return prev.WithClaimChanges(rev, dynamicresources.ClaimChanges{Seed: upd}), nil
	}
	updV1, err := readChanged(changedV1, d.V1.Claims.Get)
	if err != nil {
		return nil, err
	}
	return prev.WithClaimChanges(rev, dynamicresources.ClaimChanges{Seed: upd, V1: updV1}), nil
}

// readChanged reads the claims with these keys (namespace/name) through
// get: nil for one that is gone.
func readChanged[T any](keys map[string]struct{}, get func(ns, name string) (*T, error)) (map[string]*T, error) {
	out := make(map[string]*T, len(keys))
	for k := range keys {
		ns, name, _ := strings.Cut(k, "/")
		c, err := get(ns, name)
		switch {
		case apierrors.IsNotFound(err):
			out[k] = nil
		case err != nil:
			return nil, fmt.Errorf("read DRA claim %s: %w", k, err)
		default:
			out[k] = c
		}
	}
	return out, nil
}

// list lists every DRA object, carrying over from prev the models and
// node states of nodes whose slices and claims did not change.
func (d *source) list(prev *dynamicresources.Objects, rev string) (*dynamicresources.Objects, error) {
	l := dynamicresources.Lists{Revision: rev}
	var err error
	all := labels.Everything()
	if l.Claims, err = d.Claims.List(all); err == nil {
		if l.Slices, err = d.Slices.List(all); err == nil {
			if l.Classes, err = d.Classes.List(all); err == nil {
				if l.ClassParameters, err = d.ClassParameters.List(all); err == nil {
					if l.ClaimParameters, err = d.ClaimParameters.List(all); err == nil {
						l.Contexts, err = d.contextList()
					}
				}
			}
		}
	}
	if err == nil && d.V1 != nil {
		err = d.listV1(&l)
	}
	if err != nil {
		return nil, fmt.Errorf("list DRA objects: %w", err)
	}
	if prev != nil {
		return prev.Next(l), nil
	}
	return dynamicresources.NewObjects(l), nil
}

// listV1 lists the resource.k8s.io/v1 objects and the namespaces that
// allow admin access.
func (d *source) listV1(l *dynamicresources.Lists) error {
	all := labels.Everything()
	var err error
	if l.V1Claims, err = d.V1.Claims.List(all); err != nil {
		return err
	}
	if l.V1Slices, err = d.V1.Slices.List(all); err != nil {
		return err
	}
	if l.DeviceClasses, err = d.V1.Classes.List(all); err != nil {
		return err
	}
	if d.V1.TaintRules != nil {
		if l.TaintRules, err = d.V1.TaintRules.List(all); err != nil {
			return err
		}
	}
	nss, err := d.V1.Namespaces.List(all)
	if err != nil {
		return err
	}
	l.AdminNamespaces = map[string]bool{}
	for _, ns := range nss {
		if ns.Labels[resourcev1.DRAAdminNamespaceLabelKey] == "true" {
			l.AdminNamespaces[ns.Name] = true
		}
	}
	return nil
}

// contextList lists the scheduling contexts, each the newer of the
// informer's copy and the scheduler's own last write.
func (d *source) contextList() ([]*resourcev1alpha2.PodSchedulingContext, error) {
	list, err := d.Contexts.List(labels.Everything())
	if err != nil {
		return nil, err
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	seen := map[string]bool{}
	for i, sc := range list {
		k := sc.Namespace + "/" + sc.Name
		seen[k] = true
		if w := d.written[k]; w != nil {
			if w.UID == sc.UID && parseRV(w.ResourceVersion) > parseRV(sc.ResourceVersion) {
				list[i] = w
			} else {
				delete(d.written, k) // the informer caught up, or the object was replaced
			}
		}
	}
	for k, w := range d.written {
		if !seen[k] {
			list = append(list, w) // created, not in the informer yet
		}
	}
	return list, nil
}

// context returns the pod's scheduling context as the scheduler knows it
// best (informer or own write), or nil.
func (d *source) context(ns, name string) *resourcev1alpha2.PodSchedulingContext {
	sc, err := d.Contexts.Get(ns, name)
	if err != nil {
		sc = nil
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if w := d.written[ns+"/"+name]; w != nil && (sc == nil || (w.UID == sc.UID && parseRV(w.ResourceVersion) > parseRV(sc.ResourceVersion))) {
		return w
	}
	return sc
}

// wrote records the scheduler's write of a context (nil after a delete).
func (d *source) wrote(ns, name string, sc *resourcev1alpha2.PodSchedulingContext) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.dirty = true
	if sc == nil {
		delete(d.written, ns+"/"+name)
		return
	}
	d.written[ns+"/"+name] = sc
}

func parseRV(s string) uint64 {
	v, _ := strconv.ParseUint(s, 10, 64)
	return v
}

func untomb(obj any) any {
	if t, ok := obj.(toolscache.DeletedFinalStateUnknown); ok {
		return t.Obj
	}
	return obj
}
