package node

import (
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"sync"
	"time"

	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// fleetRegisterParallel bounds concurrent node registrations of a fleet.
const fleetRegisterParallel = 16

// Fleet runs many agents in one process (simulated nodes): they share one
// pod informer over every bound pod, whose events are dispatched to the
// agent named by spec.nodeName, so the cost per node is its heartbeat,
// its relist loop and its pods' workers.
type Fleet struct {
	c      *client.Client
	agents map[string]*Agent
	order  []*Agent
}

// NewFleet creates the agents of cfgs. c reads the pods of all of them
// (an admin or node identity may list every pod).
func NewFleet(c *client.Client, cfgs []Config) (*Fleet, error) {
	f := &Fleet{c: c, agents: make(map[string]*Agent, len(cfgs))}
	for _, cfg := range cfgs {
		if _, dup := f.agents[cfg.NodeName]; dup {
			return nil, fmt.Errorf("%w: node %s twice in the fleet", ErrInvalidConfig, cfg.NodeName)
		}
		a, err := New(cfg)
		if err != nil {
			return nil, err
		}
		f.agents[cfg.NodeName] = a
		f.order = append(f.order, a)
	}
	return f, nil
}

// Run registers every node, then runs them all until ctx ends.
func (f *Fleet) Run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := f.prepareAll(ctx); err != nil {
		return err
	}
	defer func() {
		for _, a := range f.order {
			a.shutdown()
		}
	}()
	inf := client.NewInformer(f.c.Pods("").WithoutManagedFields(), 0, nil, client.WithFieldSelector("spec.nodeName!="))
	if err := inf.AddIndexers(cache.Indexers{podNodeIndex: podNode}); err != nil {
		return fmt.Errorf("index pods by node: %w", err)
	}
	for _, a := range f.order {
		name := a.cfg.NodeName
		a.gate.useCache(func() ([]*corev1.Pod, bool, error) {
			objs, err := inf.GetIndexer().ByIndex(podNodeIndex, name)
			pods := make([]*corev1.Pod, 0, len(objs))
			for _, o := range objs {
				if p, ok := o.(*corev1.Pod); ok {
					pods = append(pods, p)
				}
			}
			return pods, inf.HasSynced(), err
		})
	}
	if _, err := inf.AddEventHandler(f.handler()); err != nil {
		return fmt.Errorf("watch pods: %w", err)
	}
	informerDone := make(chan struct{})
	go func() { defer close(informerDone); inf.RunWithContext(ctx) }()
	defer func() { cancel(); <-informerDone }()
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		cancel()
		for _, a := range f.order {
			a.disp.wait()
		}
		return nil // ctx ended while starting
	}
	var wg sync.WaitGroup
	for _, a := range f.order {
		// Spread heartbeats over one interval so they do not arrive at once.
		jitter := time.Duration(rand.Int64N(int64(a.cfg.HeartbeatInterval)))
		wg.Go(func() { a.serve(ctx, jitter) })
	}
	wg.Wait()
	return nil
}

// podNodeIndex indexes the fleet's pods by node, for the agents' return
// gates.
const podNodeIndex = "node"

func podNode(obj any) ([]string, error) {
	if p, ok := obj.(*corev1.Pod); ok {
		return []string{p.Spec.NodeName}, nil
	}
	return nil, nil
}

// prepareAll registers the nodes, a few at a time.
func (f *Fleet) prepareAll(ctx context.Context) error {
	sem := make(chan struct{}, fleetRegisterParallel)
	errs := make([]error, len(f.order))
	var wg sync.WaitGroup
	for i, a := range f.order {
		wg.Go(func() {
			sem <- struct{}{}
			defer func() { <-sem }()
			errs[i] = a.prepare(ctx)
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		for i, a := range f.order {
			if errs[i] == nil {
				a.shutdown()
			}
		}
		return err
	}
	return nil
}

// handler routes pod events to the agent of the pod's node.
func (f *Fleet) handler() cache.ResourceEventHandler {
	route := func(obj any) *dispatcher {
		if t, ok := obj.(cache.DeletedFinalStateUnknown); ok {
			obj = t.Obj
		}
		pod, ok := obj.(*corev1.Pod)
		if !ok {
			return nil
		}
		a, ok := f.agents[pod.Spec.NodeName]
		if !ok {
			return nil
		}
		return a.disp
	}
	return client.SplitReplacements(cache.ResourceEventHandlerFuncs{
		AddFunc: func(obj any) {
			if d := route(obj); d != nil {
				d.onUpdate(obj)
			}
		},
		UpdateFunc: func(_, obj any) {
			if d := route(obj); d != nil {
				d.onUpdate(obj)
			}
		},
		DeleteFunc: func(obj any) {
			if d := route(obj); d != nil {
				d.onDelete(obj)
			}
		},
	})
}
