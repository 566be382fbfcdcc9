package storage

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strconv"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
)

// CompactRevKey is the key API servers sharing one etcd use to agree on
// who compacts, as kube-apiserver's "compact_rev_key".
const CompactRevKey = "/allot/compact_rev_key"

// RunCompactor compacts etcd history until ctx ends. Every interval it
// compacts to the revision observed one interval earlier, so watchers
// lagging by less than one interval never see ErrCompacted. Several
// processes may run it against the same etcd: a compare-and-swap on
// CompactRevKey lets only one of them compact per interval.
func RunCompactor(ctx context.Context, s *Store, interval time.Duration, logger *slog.Logger) {
	if logger == nil {
		logger = slog.Default()
	}
	if interval <= 0 {
		logger.Warn("etcd compactor disabled", "interval", interval)
		return
	}
	t := time.NewTicker(interval)
	defer t.Stop()
	var version, rev int64
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		v, r, compacted, err := compactOnce(ctx, s, version, rev)
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			logger.Error("etcd compaction failed", "revision", rev, "err", err)
			continue // retry next interval with the same state
		}
		if compacted {
			logger.Debug("etcd compacted", "revision", rev)
		}
		version, rev = v, r
	}
}

// compactOnce performs one compactor step. version is the CompactRevKey
// version this process last saw and rev the revision it observed one
// interval ago. It returns the new version, the current revision and
// whether this call compacted.
func compactOnce(ctx context.Context, s *Store, version, rev int64) (int64, int64, bool, error) {
	cctx, cancel := s.withTimeout(ctx)
	defer cancel()
	resp, err := s.client.Txn(cctx).
		If(clientv3.Compare(clientv3.Version(CompactRevKey), "=", version)).
		Then(clientv3.OpPut(CompactRevKey, strconv.FormatInt(rev, 10))).
		Else(clientv3.OpGet(CompactRevKey)).Commit()
	if err != nil {
		return version, rev, false, fmt.Errorf("claim compaction: %w", mapErr(err))
	}
	cur := resp.Header.Revision
	if !resp.Succeeded {
		// Another process compacted (or this one restarted); adopt its
		// version and wait one more interval.
		kvs := resp.Responses[0].GetResponseRange().GetKvs()
		if len(kvs) == 0 {
			return 0, cur, false, nil
		}
		return kvs[0].Version, cur, false, nil
	}
	if rev == 0 {
		return version + 1, cur, false, nil // first round: nothing observed yet
	}
	if err := s.Compact(ctx, rev); err != nil && !errors.Is(err, ErrCompacted) {
		return version + 1, cur, false, err
	}
	return version + 1, cur, true, nil
}
