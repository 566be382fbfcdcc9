package controllerutil

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/url"
	"syscall"
	"testing"

	"k8s.io/client-go/util/workqueue"
)

func TestProcessNext(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	tests := map[string]struct {
		err          error
		wantRequeues int
	}{
		"success forgets":     {err: nil, wantRequeues: 0},
		"failure requeues":    {err: errors.New("boom"), wantRequeues: 1},
		"a wait requeues too": {err: fmt.Errorf("pods remain: %w", ErrWait), wantRequeues: 1},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
			defer q.ShutDown()
			q.Add("k")
			var synced []string
			sync := func(_ context.Context, key string) error { synced = append(synced, key); return tc.err }
			if !ProcessNext(context.Background(), q, sync, log) {
				t.Fatalf("ProcessNext returned false on a live queue")
			}
			if len(synced) != 1 || synced[0] != "k" {
				t.Errorf("synced %v, want [k]", synced)
			}
			if got := q.NumRequeues("k"); got != tc.wantRequeues {
				t.Errorf("NumRequeues = %d, want %d", got, tc.wantRequeues)
			}
		})
	}
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	q.ShutDown()
	if ProcessNext(context.Background(), q, func(context.Context, string) error { return nil }, log) {
		t.Errorf("ProcessNext returned true on a shut-down queue")
	}
}

// TestProcessNextUnreachable: a key whose sync failed because the API
// server could not be reached comes back (after UnreachableRetry) without
// a step of its exponential back-off, however often it fails: a server
// that is down for a while must not leave keys waiting a minute and more
// after its return.
func TestProcessNextUnreachable(t *testing.T) {
	log := slog.New(slog.NewTextHandler(io.Discard, nil))
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[string]())
	defer q.ShutDown()
	q.Add("k")
	down := &url.Error{Op: "Delete", URL: "https://127.0.0.1:1/api/v1/x", Err: &net.OpError{Op: "dial", Net: "tcp", Err: syscall.ECONNREFUSED}}
	tries := 0
	sync := func(context.Context, string) error {
		tries++
		if tries < 3 {
			return down
		}
		return nil
	}
	for range 3 {
		if !ProcessNext(context.Background(), q, sync, log) {
			t.Fatalf("ProcessNext returned false on a live queue")
		}
		if got := q.NumRequeues("k"); got != 0 {
			t.Fatalf("after try %d: NumRequeues = %d, want 0 (an unreachable server is no failure of the key)", tries, got)
		}
	}
	if tries != 3 {
		t.Errorf("synced %d times, want 3", tries)
	}
}
