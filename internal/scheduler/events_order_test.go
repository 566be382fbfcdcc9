package scheduler

import (
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/types"

	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/queue"
)

// orderRecorder is an EventExtension that notes where the watched pod is
// in the queue when it sees a claim event, before and after the queue
// did. Other events (a late update of the pod's own status from its
// failed attempt) are not counted.
type orderRecorder struct {
	framework.Plugin
	s      *Scheduler
	pod    types.UID
	mu     sync.Mutex
	before []queue.Location
	after  []queue.Location
}

func (r *orderRecorder) BeforeEvent(ev framework.ClusterEvent, _ any) {
	if ev.Resource != framework.ResourceClaim {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.before = append(r.before, r.s.queue.Where(r.pod))
}

func (r *orderRecorder) AfterEvent(ev framework.ClusterEvent, _ any) {
	if ev.Resource != framework.ResourceClaim {
		return
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.after = append(r.after, r.s.queue.Where(r.pod))
}

// TestExtensionsSeeEventsBeforeTheQueue: the scheduler's forwarding
// handlers give every EventExtension the event before the queue moves
// pods on it (DRA marks its objects stale there, so that a pod the event
// moves sees the event in its next snapshot: answer reuse and every cycle
// rely on it), and again after.
func TestExtensionsSeeEventsBeforeTheQueue(t *testing.T) {
	f := recordedBeforeSeen(t, Config{})
	deadline := time.Now().Add(10 * time.Second)
	for f.s.queue.Where("default/p") != queue.Unschedulable {
		if time.Now().After(deadline) {
			t.Fatalf("pod in %q, want parked", f.s.queue.Where("default/p"))
		}
		time.Sleep(time.Millisecond)
	}
	rec := &orderRecorder{s: f.s, pod: "default/p"}
	f.s.exts.events = append(f.s.exts.events, rec)
	f.dra.add(t, f.s, newClaim("p-gpu", "small")) // the claim p waits for: it moves p
	rec.mu.Lock()
	before, after := rec.before, rec.after
	rec.mu.Unlock()
	// The first claim event is the add above; the pod it moves may be
	// bound, and its claim's allocation seen as a second event, before
	// the recorder is read: only the first is the one under test.
	if len(before) < 1 || len(after) < 1 {
		t.Fatalf("the extension saw %d events before and %d after, want at least 1 and 1", len(before), len(after))
	}
	if before[0] != queue.Unschedulable {
		t.Fatalf("before the queue: pod in %q, want still parked (the queue moved it before the extension saw the event)", before[0])
	}
	if after[0] == queue.Unschedulable {
		t.Fatalf("after the queue: pod still parked; the event did not move it, so the order proves nothing")
	}
	if node := f.waitNode(t, "p"); node != "n" {
		t.Fatalf("bound to %q, want n", node)
	}
}
