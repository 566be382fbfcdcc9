package storage

import (
	"context"
	"errors"
	"fmt"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"
)

// OpKind names the kind of a transaction Op.
type OpKind int

// Op kinds; see the constructor of the same name.
const (
	OpCreate OpKind = iota + 1
	OpUpdate
	OpDelete
	OpPut
	OpCheck
	OpCheckModRevisionAtMost
)

func (k OpKind) String() string {
	switch k {
	case OpCreate:
		return "create"
	case OpUpdate:
		return "update"
	case OpDelete:
		return "delete"
	case OpPut:
		return "put"
	case OpCheck:
		return "check"
	case OpCheckModRevisionAtMost:
		return "check-modrev-at-most"
	}
	return fmt.Sprintf("OpKind(%d)", int(k))
}

// Op is one element of a Store.Txn. Build it with Create, Update, Delete,
// Put, Check or CheckModRevisionAtMost.
type Op struct {
	Kind  OpKind
	Key   string
	Value []byte
	// Rev is the expected ModRevision (Update, Delete, Check) or the upper
	// bound (CheckModRevisionAtMost).
	Rev int64
}

// Create is an Op that stores value under key; the key must not exist
// (else ErrExists).
func Create(key string, value []byte) Op { return Op{Kind: OpCreate, Key: key, Value: value} }

// Update is an Op that replaces the value of key; the key must exist (else
// ErrNotFound) and, when expectedModRev != 0, have that ModRevision (else
// ErrConflict).
func Update(key string, value []byte, expectedModRev int64) Op {
	return Op{Kind: OpUpdate, Key: key, Value: value, Rev: expectedModRev}
}

// Delete is an Op that removes key; the key must exist (else ErrNotFound)
// and, when expectedModRev != 0, have that ModRevision (else ErrConflict).
func Delete(key string, expectedModRev int64) Op {
	return Op{Kind: OpDelete, Key: key, Rev: expectedModRev}
}

// Put is an Op that stores value under key unconditionally.
func Put(key string, value []byte) Op { return Op{Kind: OpPut, Key: key, Value: value} }

// Check is a compare-only Op: the key's ModRevision must equal
// expectedModRev. expectedModRev 0 means the key must not exist (else
// ErrExists); otherwise a missing key fails with ErrNotFound and a
// different ModRevision with ErrConflict.
func Check(key string, expectedModRev int64) Op {
	return Op{Kind: OpCheck, Key: key, Rev: expectedModRev}
}

// CheckModRevisionAtMost is a compare-only Op that passes when key is
// absent or its ModRevision is <= rev (else ErrConflict). Used as an
// allocation fence: read the fence at revision rev, decide, then commit
// with this check and a Put of the fence key, so that any concurrent
// decision made on the same view fails.
func CheckModRevisionAtMost(key string, rev int64) Op {
	return Op{Kind: OpCheckModRevisionAtMost, Key: key, Rev: rev}
}

// TxnError reports which Op of a failed Txn did not hold.
type TxnError struct {
	Index  int    // position of the failing Op in the ops slice
	Key    string // its key
	Reason error  // ErrConflict, ErrExists or ErrNotFound
	// ModRevision is the key's ModRevision when the compare failed (0 if
	// absent), and Value its value then (nil if absent): a caller that
	// retries needs no read of its own.
	ModRevision int64
	Value       []byte
}

func (e *TxnError) Error() string {
	return fmt.Sprintf("txn op %d on %q failed (current modrev %d): %v", e.Index, e.Key, e.ModRevision, e.Reason)
}

// Unwrap returns the sentinel reason.
func (e *TxnError) Unwrap() error { return e.Reason }

// Txn applies ops atomically: all compares are evaluated in one etcd
// transaction and either every write happens or none does. It returns the
// revision of the transaction (the store revision when ops has no writes).
// A failed compare is reported as a *TxnError for the first failing Op.
// A key may be written by at most one Op (etcd rejects duplicates).
func (s *Store) Txn(ctx context.Context, ops []Op) (int64, error) {
	if len(ops) == 0 {
		return 0, errors.New("run txn: no ops")
	}
	var cmps []clientv3.Cmp
	var thens []clientv3.Op
	var elses []clientv3.Op
	seen := make(map[string]bool, len(ops))
	guarded := false
	for i, op := range ops {
		if err := s.validateOp(op); err != nil {
			return 0, fmt.Errorf("validate txn op %d: %w", i, err)
		}
		if !guarded && s.writeGuard != nil && (op.Kind == OpCreate || op.Kind == OpUpdate || op.Kind == OpPut) {
			guarded = true
			if err := s.writeGuard(); err != nil {
				return 0, fmt.Errorf("run txn: %w", err)
			}
		}
		if c, ok := opCompare(op); ok {
			cmps = append(cmps, c)
			if !seen[op.Key] {
				seen[op.Key] = true
				elses = append(elses, clientv3.OpGet(op.Key))
			}
		}
		if w, ok := opWrite(op); ok {
			thens = append(thens, w)
		}
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.client.Txn(ctx).If(cmps...).Then(thens...).Else(elses...).Commit()
	if err != nil {
		return 0, fmt.Errorf("run txn: %w", mapErr(err))
	}
	if resp.Succeeded {
		return resp.Header.Revision, nil
	}
	return 0, explainFailure(ops, resp)
}

func (s *Store) validateOp(op Op) error {
	switch op.Kind {
	case OpCreate, OpUpdate, OpPut:
		return s.checkSize(op.Key, op.Value)
	case OpDelete, OpCheck, OpCheckModRevisionAtMost:
		return nil
	}
	return fmt.Errorf("unknown op kind %v for %q", op.Kind, op.Key)
}

// opCompare returns the etcd compare guarding op, if any.
func opCompare(op Op) (clientv3.Cmp, bool) {
	switch op.Kind {
	case OpCreate:
		return clientv3.Compare(clientv3.CreateRevision(op.Key), "=", 0), true
	case OpUpdate, OpDelete:
		if op.Rev != 0 {
			return clientv3.Compare(clientv3.ModRevision(op.Key), "=", op.Rev), true
		}
		return clientv3.Compare(clientv3.CreateRevision(op.Key), ">", 0), true
	case OpCheck:
		return clientv3.Compare(clientv3.ModRevision(op.Key), "=", op.Rev), true
	case OpCheckModRevisionAtMost:
		// An absent key compares as ModRevision 0, which passes.
		return clientv3.Compare(clientv3.ModRevision(op.Key), "<", op.Rev+1), true
	}
	return clientv3.Cmp{}, false
}

// opWrite returns the etcd write performed by op, if any.
func opWrite(op Op) (clientv3.Op, bool) {
	switch op.Kind {
	case OpCreate, OpUpdate, OpPut:
		return clientv3.OpPut(op.Key, string(op.Value)), true
	case OpDelete:
		return clientv3.OpDelete(op.Key), true
	}
	return clientv3.Op{}, false
}

// explainFailure re-evaluates each compare against the key revisions read
// by the Else branch (same revision as the failed compares) and reports
// the first Op that did not hold.
func explainFailure(ops []Op, resp *clientv3.TxnResponse) error {
	kvs := make(map[string]*mvccpb.KeyValue, len(resp.Responses))
	for _, r := range resp.Responses {
		for _, kv := range r.GetResponseRange().GetKvs() {
			kvs[string(kv.Key)] = kv
		}
	}
	for i, op := range ops {
		kv, exists := kvs[op.Key]
		var mod int64
		var value []byte
		if exists {
			mod, value = kv.ModRevision, kv.Value
		}
		if reason := opFailure(op, mod, exists); reason != nil {
			return &TxnError{Index: i, Key: op.Key, Reason: reason, ModRevision: mod, Value: value}
		}
	}
	// Unreachable unless etcd and this evaluation disagree.
	return fmt.Errorf("run txn: compare failed but no op explains it: %w", ErrConflict)
}

// opFailure evaluates op's compare locally; nil means it held.
func opFailure(op Op, mod int64, exists bool) error {
	switch op.Kind {
	case OpCreate:
		if exists {
			return ErrExists
		}
	case OpUpdate, OpDelete:
		if !exists {
			return ErrNotFound
		}
		if op.Rev != 0 && mod != op.Rev {
			return ErrConflict
		}
	case OpCheck:
		switch {
		case op.Rev == 0 && exists:
			return ErrExists
		case op.Rev != 0 && !exists:
			return ErrNotFound
		case mod != op.Rev:
			return ErrConflict
		}
	case OpCheckModRevisionAtMost:
		if mod > op.Rev {
			return ErrConflict
		}
	}
	return nil
}
