package taineviction

import (
	"testing"
	"time"
)

// TestLimiter: a burst goes at once, then one eviction per 1/qps, and a
// refused Take takes nothing (the caller comes back after the wait it
// was told). No limiter, no limit.
func TestLimiter(t *testing.T) {
	now := time.Date(2026, 12, 7, 10, 0, 0, 0, time.UTC)
	l := NewLimiter(2, 3)
	for i := range 3 {
		if w := l.Take(now); w != 0 {
			t.Fatalf("take %d of the burst: wait %v", i, w)
		}
	}
	w := l.Take(now)
	if w <= 0 || w > 500*time.Millisecond {
		t.Fatalf("after the burst: wait %v, want (0, 500ms]", w)
	}
	if w2 := l.Take(now); w2 != w {
		t.Fatalf("a refused take took a token: wait %v then %v", w, w2)
	}
	if w := l.Take(now.Add(w)); w != 0 {
		t.Fatalf("after the wait: wait %v", w)
	}
	var none *Limiter
	if NewLimiter(0, 10) != nil || none.Take(now) != 0 {
		t.Fatal("qps 0 must be no limit")
	}
}
