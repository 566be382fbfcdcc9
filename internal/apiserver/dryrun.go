package apiserver

import (
	"context"
	"fmt"
	"math"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	metav1validation "k8s.io/apimachinery/pkg/apis/meta/v1/validation"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"allot.dev/allot/internal/storage"
)

// A dry run (?dryRun=All on create, update, patch, delete,
// deletecollection and pods/binding, or DeleteOptions.dryRun) takes the
// write's own path: decoding, defaulting, validation, admission with its
// quota checks, authorization, resourceVersion preconditions, conflict
// retries. Only commit differs: it evaluates what the transaction would
// compare (the object's revision or absence, the guards of quotas,
// namespaces and allocation fences) and checks the values' size, in one
// read-only etcd transaction, and writes nothing. The answer is the object
// as it would be stored, without a new resourceVersion (an update keeps
// the current one, a create has none); no watch event, no quota charged,
// no CRD served (afterWrite is skipped).
//
// dispatch (and, for DeleteOptions in a body, deleteContext) marks the
// request's context.
type dryRunKey struct{}

// withDryRun marks ctx as a dry run's.
func withDryRun(ctx context.Context) context.Context {
	return context.WithValue(ctx, dryRunKey{}, true)
}

func isDryRun(ctx context.Context) bool {
	dry, _ := ctx.Value(dryRunKey{}).(bool)
	return dry
}

// checkDryRun validates dryRun values as Kubernetes does: each must be
// "All" (metav1.DryRunAll). Like kube-apiserver, an unknown value is
// refused as an invalid CreateOptions, UpdateOptions, PatchOptions or
// DeleteOptions (optionsKind) before anything else, naming the dryRun
// field and the supported value. It reports whether the write is a dry
// run.
func checkDryRun(values []string, optionsKind string) (bool, error) {
	if len(values) == 0 {
		return false, nil
	}
	if errs := metav1validation.ValidateDryRun(field.NewPath("dryRun"), values); len(errs) > 0 {
		return false, apierrors.NewInvalid(schema.GroupKind{Group: metav1.GroupName, Kind: optionsKind}, "", errs)
	}
	return true, nil
}

// optionsKindOf names the options a write verb takes; "" for reads.
func optionsKindOf(verb string) string {
	switch verb {
	case "create":
		return "CreateOptions"
	case "update":
		return "UpdateOptions"
	case "patch":
		return "PatchOptions"
	case "delete", "deletecollection":
		return "DeleteOptions"
	}
	return ""
}

// commit runs one etcd transaction of a write; every API write goes
// through it. In a dry run it runs the transaction's guards instead: each
// write becomes the compare it carries (a create: the key is absent; an
// update or delete: the key is at the expected revision), compare-only
// ops stay, so a failure is the same *storage.TxnError at the same index
// and the caller retries or answers as for a real write. A transaction of
// compares only writes nothing and makes no revision; commit then returns
// revision 0.
func (s *Server) commit(ctx context.Context, ops []storage.Op) (int64, error) {
	if !isDryRun(ctx) {
		return s.store.Txn(ctx, ops)
	}
	guards := make([]storage.Op, len(ops))
	for i, op := range ops {
		if len(op.Value) > s.store.MaxValueBytes() {
			return 0, fmt.Errorf("validate txn op %d: value of %q: %d bytes exceeds limit %d: %w", i, op.Key, len(op.Value), s.store.MaxValueBytes(), storage.ErrTooLarge)
		}
		switch {
		case op.Kind == storage.OpCreate:
			guards[i] = storage.Check(op.Key, 0)
		case (op.Kind == storage.OpUpdate || op.Kind == storage.OpDelete) && op.Rev != 0:
			guards[i] = storage.Check(op.Key, op.Rev)
		case op.Kind == storage.OpCheck || op.Kind == storage.OpCheckModRevisionAtMost:
			guards[i] = op
		default:
			// A put, or an update or delete at any revision: nothing to
			// compare (the API server writes objects only at a revision).
			// A check that always holds keeps the indexes.
			guards[i] = storage.CheckModRevisionAtMost(op.Key, math.MaxInt64-1)
		}
	}
	if _, err := s.store.Txn(ctx, guards); err != nil {
		return 0, err
	}
	return 0, nil
}
