package keylock

import (
	"context"
	"errors"
	"testing"
	"time"
)

func TestLockSerializesPerKeyAndDropsIdleLocks(t *testing.T) {
	var l Locks
	ctx := context.Background()
	unlockA, err := l.Lock(ctx, "a")
	if err != nil {
		t.Fatal(err)
	}
	unlockB, err := l.Lock(ctx, "b") // another key does not wait
	if err != nil {
		t.Fatal(err)
	}
	short, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	if _, err := l.Lock(short, "a"); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("second Lock of a held key = %v, want the context's error", err)
	}
	got := make(chan struct{})
	go func() {
		unlock, err := l.Lock(ctx, "a")
		if err == nil {
			unlock()
		}
		close(got)
	}()
	unlockA()
	<-got
	unlockB()
	if n := l.size(); n != 0 {
		t.Errorf("%d locks kept after every key was released, want 0", n)
	}
}
