package main

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/spf13/cobra"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	corev1 "allot.dev/allot/api/core/v1"
)

type deleteOptions struct {
	cf             clientFlags
	files          []string
	wait           bool
	timeout        time.Duration
	gracePeriod    int64
	force          bool
	ignoreNotFound bool
}

// deleteTarget is one object to delete.
type deleteTarget struct {
	mapping *meta.RESTMapping
	ns      string
	name    string
}

func (t deleteTarget) String() string {
	return fmt.Sprintf("%s %q", qualifiedKind(t.mapping), t.name)
}

func newDeleteCommand() *cobra.Command {
	o := deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete KIND NAME... | delete KIND/NAME... | delete -f FILE",
		Short: "Delete objects and wait until they are gone",
		Long: `Delete objects named on the command line or in manifests. By default the
command waits (up to --timeout) until each object is gone: objects with
finalizers, and pods bound to a node, go away only once their finalizers are
removed or their node agent has stopped them. --force removes pods at once.`,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, err := o.cf.open(cmd)
			if err != nil {
				return err
			}
			targets, err := o.targets(cmd, s, args)
			if err != nil {
				return err
			}
			return o.run(cmd.Context(), s, targets)
		},
	}
	o.cf.add(cmd)
	f := cmd.Flags()
	f.StringSliceVarP(&o.files, "filename", "f", nil, "delete the objects of these manifests (file, directory or -)")
	f.BoolVar(&o.wait, "wait", true, "wait until the objects are gone")
	f.DurationVar(&o.timeout, "timeout", 60*time.Second, "how long to wait for the objects to go")
	f.Int64Var(&o.gracePeriod, "grace-period", -1, "seconds a pod gets to stop (-1: the pod's own; 0: at once)")
	f.BoolVar(&o.force, "force", false, "remove pods from the API at once, without waiting for their node agent to stop them and release their devices "+
		"(it still does so; their DRA claims are released only once the node has unprepared them, or the node is deleted or tainted node.kubernetes.io/out-of-service); the same as --grace-period 0")
	f.BoolVar(&o.ignoreNotFound, "ignore-not-found", false, "treat objects that do not exist as deleted")
	return cmd
}

func (o *deleteOptions) targets(cmd *cobra.Command, s *session, args []string) ([]deleteTarget, error) {
	ctx := cmd.Context()
	if len(o.files) > 0 {
		if len(args) > 0 {
			return nil, errors.New("give either -f or KIND NAME, not both")
		}
		ms, errs := readManifests(o.files, cmd.InOrStdin())
		if len(errs) > 0 {
			for _, err := range errs[:len(errs)-1] {
				s.warnf("%v", err)
			}
			return nil, errs[len(errs)-1]
		}
		var out []deleteTarget
		for _, m := range ms {
			mapping, err := s.kinds.forKind(ctx, m.gvk)
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.where(), err)
			}
			ns, err := s.objectNamespace(mapping, m.obj.DeepCopy())
			if err != nil {
				return nil, fmt.Errorf("%s: %w", m.where(), err)
			}
			out = append(out, deleteTarget{mapping: mapping, ns: ns, name: m.obj.GetName()})
		}
		return out, nil
	}
	if len(args) == 0 {
		return nil, errors.New("delete needs KIND NAME... or -f FILE")
	}
	reqs, err := parseGetArgs(ctx, s, args)
	if err != nil {
		return nil, err
	}
	var out []deleteTarget
	for _, r := range reqs {
		if len(r.names) == 0 {
			return nil, fmt.Errorf("delete needs names of %s", r.mapping.Resource.Resource)
		}
		ns := ""
		if namespaced(r.mapping) {
			ns = s.ns
		}
		for _, n := range r.names {
			out = append(out, deleteTarget{mapping: r.mapping, ns: ns, name: n})
		}
	}
	return out, nil
}

func (o *deleteOptions) run(ctx context.Context, s *session, targets []deleteTarget) error {
	opts := metav1.DeleteOptions{}
	if o.force {
		o.gracePeriod = 0
	}
	if o.gracePeriod >= 0 {
		opts.GracePeriodSeconds = &o.gracePeriod
	}
	var failed error
	var deleted []deleteTarget
	for _, t := range targets {
		err := s.resource(t.mapping, t.ns).Delete(ctx, t.name, opts)
		switch {
		case apierrors.IsNotFound(err) && o.ignoreNotFound:
			continue
		case err != nil:
			failed = err
			s.warnf("%v", err)
			continue
		}
		fmt.Fprintf(s.out, "%s deleted\n", t)
		deleted = append(deleted, t)
	}
	if o.wait && len(deleted) > 0 {
		wctx, cancel := context.WithTimeout(ctx, o.timeout)
		defer cancel()
		for _, t := range deleted {
			if err := waitDeleted(wctx, s, t); err != nil {
				failed = err
				s.warnf("%v", err)
			}
		}
	}
	if failed != nil {
		return errors.New("not every object was deleted")
	}
	return nil
}

// waitDeleted returns once the object is gone, watching it by name.
func waitDeleted(ctx context.Context, s *session, t deleteTarget) error {
	res := s.resource(t.mapping, t.ns)
	for {
		obj, err := res.Get(ctx, t.name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return timeoutOr(ctx, s, t, fmt.Errorf("wait for %s to be deleted: %w", t, err))
		}
		w, err := res.Watch(ctx, metav1.ListOptions{
			FieldSelector: "metadata.name=" + t.name, ResourceVersion: obj.GetResourceVersion(),
		})
		if err != nil {
			return timeoutOr(ctx, s, t, fmt.Errorf("watch %s: %w", t, err))
		}
		gone := awaitDeletedEvent(ctx, w)
		w.Stop()
		if gone {
			return nil
		}
		if ctx.Err() != nil {
			return timeoutOr(ctx, s, t, nil)
		}
	}
}

// awaitDeletedEvent reports whether the watch saw a DELETED event before
// it ended.
func awaitDeletedEvent(ctx context.Context, w watch.Interface) bool {
	for {
		select {
		case <-ctx.Done():
			return false
		case ev, ok := <-w.ResultChan():
			if !ok {
				return false
			}
			if ev.Type == watch.Deleted {
				return true
			}
			if ev.Type == watch.Error {
				return false
			}
		}
	}
}

func timeoutOr(ctx context.Context, s *session, t deleteTarget, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("timed out waiting for %s to be deleted%s", t, whyNotDeleted(s, t))
	}
	return err
}

// whyNotDeleted says, for a pod still being deleted, what its deletion
// waits for (as its node agent reported it) and how to force it.
func whyNotDeleted(s *session, t deleteTarget) string {
	if t.mapping.GroupVersionKind.Kind != "Pod" {
		return ""
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	u, err := s.resource(t.mapping, t.ns).Get(ctx, t.name, metav1.GetOptions{})
	if err != nil {
		return ""
	}
	var pod corev1.Pod
	if fromUnstructured(u, &pod) != nil {
		return ""
	}
	_, blocker, ok := terminating(&pod, time.Now())
	if !ok {
		return ""
	}
	if blocker == "" {
		return fmt.Sprintf(": its node agent on %s has not finished stopping it (allot explain pod %s -n %s; --force removes it at once)",
			orNone(pod.Spec.NodeName), pod.Name, pod.Namespace)
	}
	return ": " + blocker
}
