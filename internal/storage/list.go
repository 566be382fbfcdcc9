package storage

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"strings"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// ListOptions selects a page of a List.
type ListOptions struct {
	// Limit is the maximum number of items to return; 0 means all.
	Limit int64
	// Continue is the token from a previous page's ListResult.Continue.
	Continue string
	// Revision reads at that revision (ErrCompacted if compacted); 0 reads
	// the latest. With Continue set it must be 0 or equal the token's.
	Revision int64
	// Serializable reads the member's own state without confirming with
	// the cluster's leader that it is current: no wait on the raft loop,
	// but on a member that lags, an older state. A single member (allot
	// up's embedded etcd) is always current.
	Serializable bool
}

// ListResult is one page of a List.
type ListResult struct {
	Items []KV
	// Revision is the revision every page of this List is read at.
	Revision int64
	// Continue fetches the next page; empty when this is the last one.
	Continue string
	// RemainingItemCount is the number of items after this page, set when
	// Continue is non-empty.
	RemainingItemCount *int64
}

// continueToken is the decoded form of ListResult.Continue.
type continueToken struct {
	V     int    `json:"v"`
	Rev   int64  `json:"rev"`
	Start string `json:"start"` // key suffix after the listed prefix
}

func encodeContinue(rev int64, startSuffix string) (string, error) {
	b, err := json.Marshal(continueToken{V: 1, Rev: rev, Start: startSuffix})
	if err != nil {
		return "", fmt.Errorf("encode continue token: %w", err)
	}
	return base64.RawURLEncoding.EncodeToString(b), nil
}

func decodeContinue(token string) (continueToken, error) {
	var t continueToken
	b, err := base64.RawURLEncoding.DecodeString(token)
	if err != nil {
		return t, fmt.Errorf("decode continue token: %w: %w", ErrInvalidContinue, err)
	}
	if err := json.Unmarshal(b, &t); err != nil {
		return t, fmt.Errorf("decode continue token: %w: %w", ErrInvalidContinue, err)
	}
	if t.V != 1 || t.Rev <= 0 || t.Start == "" {
		return t, fmt.Errorf("decode continue token: %w: unsupported version or empty fields", ErrInvalidContinue)
	}
	return t, nil
}

// List returns the keys under prefix in key order. A paginated List reads
// every page at the revision of the first page; when that revision has
// been compacted the next page fails with ErrCompacted (the caller answers
// 410 Gone "continue token expired").
func (s *Store) List(ctx context.Context, prefix string, opts ListOptions) (ListResult, error) {
	start, rev, err := listStart(prefix, opts)
	if err != nil {
		return ListResult{}, fmt.Errorf("list %q: %w", prefix, err)
	}
	getOpts := []clientv3.OpOption{clientv3.WithRange(clientv3.GetPrefixRangeEnd(prefix))}
	if rev != 0 {
		getOpts = append(getOpts, clientv3.WithRev(rev))
	}
	if opts.Limit > 0 {
		getOpts = append(getOpts, clientv3.WithLimit(opts.Limit))
	}
	if opts.Serializable {
		getOpts = append(getOpts, clientv3.WithSerializable())
	}
	ctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.client.Get(ctx, start, getOpts...)
	if err != nil {
		return ListResult{}, fmt.Errorf("list %q at revision %d: %w", prefix, rev, mapErr(err))
	}
	if rev == 0 {
		rev = resp.Header.Revision
	}
	res := ListResult{Items: make([]KV, len(resp.Kvs)), Revision: rev}
	for i, kv := range resp.Kvs {
		res.Items[i] = kvFromPB(kv)
	}
	if resp.More && len(res.Items) > 0 {
		last := res.Items[len(res.Items)-1].Key
		// The next page starts right after the last key returned.
		res.Continue, err = encodeContinue(rev, strings.TrimPrefix(last, prefix)+"\x00")
		if err != nil {
			return ListResult{}, fmt.Errorf("list %q: %w", prefix, err)
		}
		remaining := resp.Count - int64(len(res.Items))
		res.RemainingItemCount = &remaining
	}
	return res, nil
}

// listStart returns the first key and the revision of the requested page.
func listStart(prefix string, opts ListOptions) (string, int64, error) {
	if opts.Continue == "" {
		if opts.Revision < 0 {
			return "", 0, fmt.Errorf("check revision %d: must not be negative", opts.Revision)
		}
		return prefix, opts.Revision, nil
	}
	t, err := decodeContinue(opts.Continue)
	if err != nil {
		return "", 0, err
	}
	if opts.Revision != 0 && opts.Revision != t.Rev {
		return "", 0, fmt.Errorf("check continue token: revision %d differs from requested %d: %w", t.Rev, opts.Revision, ErrInvalidContinue)
	}
	return prefix + t.Start, t.Rev, nil
}
