package queue

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var (
	makePod  = schedtest.MakePod
	makeNode = schedtest.MakeNode
)

// clock is a fake clock.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) Step(d time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.t = c.t.Add(d)
}

func newQueue(t *testing.T) (*Queue, *clock) {
	t.Helper()
	fw, err := plugins.NewDefaultFramework(plugins.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c := &clock{t: time.Unix(1000, 0)}
	q := New(Options{
		InitialBackoff: time.Second, MaxBackoff: 10 * time.Second, UnschedulableTimeout: time.Minute,
		Events: fw.EventsToRegister(), Now: c.Now,
	})
	return q, c
}

func pop(t *testing.T, q *Queue) *QueuedPod {
	t.Helper()
	if a, _, _ := q.Len(); a == 0 {
		t.Fatal("pop from an empty active queue would block")
	}
	qp, err := q.Pop()
	if err != nil {
		t.Fatal(err)
	}
	return qp
}

func TestOrderByPriorityThenAge(t *testing.T) {
	q, c := newQueue(t)
	for _, p := range []*corev1.Pod{
		makePod("old-low").Obj(),
		makePod("high").Priority(100).Obj(),
		makePod("new-low").Obj(),
		makePod("negative").Priority(-1).Obj(),
		makePod("high-later").Priority(100).Obj(),
	} {
		q.Add(p)
		c.Step(time.Millisecond)
	}
	var got []string
	for range 5 {
		got = append(got, pop(t, q).Pod.Name)
	}
	want := []string{"high", "high-later", "old-low", "new-low", "negative"}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("order = %v, want %v", got, want)
		}
	}
}

func TestBackoffDoublesUpToMax(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Obj()
	q.Add(pod)
	want := []time.Duration{1, 2, 4, 8, 10, 10}
	for i, w := range want {
		qp := pop(t, q)
		q.Backoff(qp)
		if where := q.Where(pod.UID); where != Backoff {
			t.Fatalf("attempt %d: pod in %q, want backoff", i+1, where)
		}
		c.Step(w*time.Second - time.Millisecond)
		q.Flush()
		if q.Where(pod.UID) != Backoff {
			t.Fatalf("attempt %d: left backoff before %v", i+1, w*time.Second)
		}
		c.Step(time.Millisecond)
		q.Flush()
		if q.Where(pod.UID) != Active {
			t.Fatalf("attempt %d: still backing off after %v", i+1, w*time.Second)
		}
	}
}

// parkForCPU pops pod and parks it as rejected by NodeResourcesFit.
func parkForCPU(t *testing.T, q *Queue, pod *corev1.Pod) {
	t.Helper()
	q.Add(pod)
	q.Unschedulable(pop(t, q), []string{"NodeResourcesFit"}, false)
	if q.Where(pod.UID) != Unschedulable {
		t.Fatalf("pod in %q, want unschedulable", q.Where(pod.UID))
	}
}

func TestEventDrivenMoves(t *testing.T) {
	small := makeNode("n").Alloc("cpu", "1").Obj()
	tests := map[string]struct {
		rejectedBy string
		ev         framework.ClusterEvent
		old, new   any
		moves      bool
	}{
		"cpu: node grows":        {"NodeResourcesFit", ev(framework.Node, framework.Update), small, makeNode("n").Alloc("cpu", "4").Obj(), true},
		"cpu: big node added":    {"NodeResourcesFit", ev(framework.Node, framework.Add), nil, makeNode("m").Alloc("cpu", "4").Obj(), true},
		"cpu: pod deleted":       {"NodeResourcesFit", ev(framework.AssignedPod, framework.Delete), makePod("x").Node("n").Obj(), nil, true},
		"cpu: node relabeled":    {"NodeResourcesFit", ev(framework.Node, framework.Update), small, makeNode("n").Alloc("cpu", "1").Label("a", "b").Obj(), false},
		"cpu: small node added":  {"NodeResourcesFit", ev(framework.Node, framework.Add), nil, makeNode("m").Alloc("cpu", "1").Obj(), false},
		"cpu: pod added":         {"NodeResourcesFit", ev(framework.AssignedPod, framework.Add), nil, makePod("x").Node("n").Obj(), false},
		"cpu: claim changed":     {"NodeResourcesFit", ev(framework.ResourceClaim, framework.Update), nil, nil, false},
		"selector: pod deleted":  {"NodeAffinity", ev(framework.AssignedPod, framework.Delete), makePod("x").Node("n").Obj(), nil, false},
		"selector: node labeled": {"NodeAffinity", ev(framework.Node, framework.Update), small, makeNode("n").Alloc("cpu", "1").Label("disk", "ssd").Obj(), true},
		"unknown plugin":         {"NoSuchPlugin", ev(framework.Node, framework.Add), nil, makeNode("m").Obj(), false},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			q, c := newQueue(t)
			pod := makePod("p").Req("cpu", "2").NodeSelector("disk", "ssd").Obj()
			q.Add(pod)
			q.Unschedulable(pop(t, q), []string{tc.rejectedBy}, false)
			c.Step(2 * time.Second) // past the first backoff
			q.OnEvent(tc.ev, tc.old, tc.new)
			got := q.Where(pod.UID)
			if tc.moves && got != Active || !tc.moves && got != Unschedulable {
				t.Fatalf("after %v the pod is in %q (moves: %v)", tc.ev, got, tc.moves)
			}
		})
	}
}

func ev(r framework.EventResource, a framework.ActionType) framework.ClusterEvent {
	return framework.ClusterEvent{Resource: r, ActionType: a}
}

func TestMovedPodStillBacksOff(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Req("cpu", "2").Obj()
	parkForCPU(t, q, pod)
	q.OnEvent(ev(framework.AssignedPod, framework.Delete), makePod("x").Obj(), nil)
	if q.Where(pod.UID) != Backoff {
		t.Fatalf("pod in %q, want backoff: its first backoff has not ended", q.Where(pod.UID))
	}
	c.Step(time.Second)
	q.Flush()
	if q.Where(pod.UID) != Active {
		t.Fatalf("pod in %q, want active", q.Where(pod.UID))
	}
}

func TestWaitingPodSkipsBackoff(t *testing.T) {
	q, _ := newQueue(t)
	pod := makePod("p").Obj()
	q.Add(pod)
	q.Unschedulable(pop(t, q), nil, true)
	q.OnEvent(ev(framework.ResourceClaim, framework.Add), nil, nil)
	if q.Where(pod.UID) != Active {
		t.Fatalf("waiting pod in %q, want active at once", q.Where(pod.UID))
	}
}

func TestNoRejectingPluginMovesOnAnyEvent(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Obj()
	q.Add(pod)
	q.Unschedulable(pop(t, q), nil, false) // e.g. no nodes at all
	c.Step(time.Second)
	q.OnEvent(ev(framework.Node, framework.Add), nil, makeNode("n").Obj())
	if q.Where(pod.UID) != Active {
		t.Fatalf("pod in %q, want active", q.Where(pod.UID))
	}
}

func TestEventDuringAttemptIsNotLost(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Req("cpu", "2").Obj()
	q.Add(pod)
	qp := pop(t, q)
	other := makePod("other").Obj()
	q.Add(other)
	otherQP := pop(t, q)
	// While both are in flight, a pod that held cpu goes away.
	q.OnEvent(ev(framework.AssignedPod, framework.Delete), makePod("x").Node("n").Obj(), nil)
	q.Done(otherQP.Pod.UID)
	q.Unschedulable(qp, []string{"NodeResourcesFit"}, false)
	if got := q.Where(pod.UID); got != Backoff {
		t.Fatalf("pod in %q: the event during its attempt was lost", got)
	}
	c.Step(time.Second)
	q.Flush()
	if got := q.Where(pod.UID); got != Active {
		t.Fatalf("pod in %q after its backoff", got)
	}
	if len(q.events) != 0 {
		t.Fatalf("%d events kept with nothing in flight", len(q.events))
	}
}

func TestUnrelatedEventDuringAttemptParks(t *testing.T) {
	q, _ := newQueue(t)
	pod := makePod("p").Req("cpu", "2").Obj()
	q.Add(pod)
	qp := pop(t, q)
	q.OnEvent(ev(framework.AssignedPod, framework.Add), nil, makePod("x").Node("n").Obj())
	q.Unschedulable(qp, []string{"NodeResourcesFit"}, false)
	if got := q.Where(pod.UID); got != Unschedulable {
		t.Fatalf("pod in %q, want unschedulable", got)
	}
}

func TestUpdates(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Req("cpu", "2").Obj()
	parkForCPU(t, q, pod)
	withStatus := pod.DeepCopy()
	withStatus.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse}}
	q.Update(pod, withStatus)
	if q.Where(pod.UID) != Unschedulable {
		t.Fatal("a status-only update moved a parked pod")
	}
	relabeled := withStatus.DeepCopy()
	relabeled.Labels = map[string]string{"a": "b"}
	c.Step(time.Second)
	q.Update(withStatus, relabeled)
	if q.Where(pod.UID) != Active {
		t.Fatalf("a spec/label update should retry the pod; it is in %q", q.Where(pod.UID))
	}
	if qp := pop(t, q); qp.Pod != relabeled || qp.Attempts != 2 {
		t.Fatalf("popped %v attempts %d, want the updated object on attempt 2", qp.Pod.Labels, qp.Attempts)
	}
}

func TestUpdateDuringAttempt(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Obj()
	q.Add(pod)
	qp := pop(t, q)
	tolerant := pod.DeepCopy()
	tolerant.Spec.Tolerations = []corev1.Toleration{{Operator: corev1.TolerationOpExists}}
	q.Update(pod, tolerant)
	q.Unschedulable(qp, []string{"TaintToleration"}, false)
	if q.Where(pod.UID) != Backoff {
		t.Fatalf("pod changed during its attempt is in %q, want backoff", q.Where(pod.UID))
	}
	c.Step(time.Second)
	q.Flush()
	if got := pop(t, q); got.Pod != tolerant {
		t.Fatal("the requeued pod is not the latest object")
	}
}

func TestDeleteDuringAttempt(t *testing.T) {
	q, _ := newQueue(t)
	pod := makePod("p").Obj()
	q.Add(pod)
	qp := pop(t, q)
	q.Delete(pod)
	q.Backoff(qp)
	if q.Where(pod.UID) != Absent {
		t.Fatalf("deleted pod came back to %q", q.Where(pod.UID))
	}
}

func TestSafetyNet(t *testing.T) {
	q, c := newQueue(t)
	pod := makePod("p").Req("cpu", "2").Obj()
	parkForCPU(t, q, pod)
	c.Step(59 * time.Second)
	q.Flush()
	if q.Where(pod.UID) != Unschedulable {
		t.Fatal("safety net fired early")
	}
	c.Step(time.Second)
	q.Flush()
	if q.Where(pod.UID) != Active {
		t.Fatalf("pod in %q after the safety-net period", q.Where(pod.UID))
	}
}

func TestPopBlocksUntilAddOrClose(t *testing.T) {
	q, _ := newQueue(t)
	got := make(chan string)
	go func() {
		qp, err := q.Pop()
		if err != nil {
			got <- err.Error()
			return
		}
		got <- qp.Pod.Name
	}()
	time.Sleep(10 * time.Millisecond)
	q.Add(makePod("late").Obj())
	if name := <-got; name != "late" {
		t.Fatalf("Pop = %s", name)
	}
	go func() {
		_, err := q.Pop()
		if errors.Is(err, ErrClosed) {
			got <- "closed"
		}
	}()
	q.Close()
	if r := <-got; r != "closed" {
		t.Fatalf("Pop after Close = %s", r)
	}
}

func TestMetricsCallback(t *testing.T) {
	var last [3]int
	q := New(Options{InitialBackoff: time.Second, MaxBackoff: time.Second,
		Metrics: func(a, b, u int) { last = [3]int{a, b, u} }})
	q.Add(makePod("a").Obj())
	q.Add(makePod("b").Obj())
	if last != [3]int{2, 0, 0} {
		t.Fatalf("metrics = %v", last)
	}
	q.Backoff(pop(t, q))
	q.Unschedulable(pop(t, q), nil, false)
	if last != [3]int{0, 1, 1} {
		t.Fatalf("metrics = %v", last)
	}
}

func TestRunEndsBackoffOnTime(t *testing.T) {
	q := New(Options{InitialBackoff: 20 * time.Millisecond, MaxBackoff: 20 * time.Millisecond, UnschedulableTimeout: 50 * time.Millisecond})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); q.Run(ctx) }()
	defer func() { cancel(); <-done }()
	backedOff, parked := makePod("b").Obj(), makePod("u").Obj()
	q.Add(backedOff)
	q.Add(parked)
	start := time.Now()
	q.Backoff(pop(t, q))
	q.Unschedulable(pop(t, q), []string{"NodeResourcesFit"}, false)
	for range 2 {
		qp, err := q.Pop()
		if err != nil {
			t.Fatal(err)
		}
		q.Done(qp.Pod.UID)
	}
	if d := time.Since(start); d < 20*time.Millisecond {
		t.Fatalf("both pods back after %v", d)
	}
}

func TestGate(t *testing.T) {
	c := &clock{t: time.Unix(1000, 0)}
	q := New(Options{
		InitialBackoff: time.Second, MaxBackoff: time.Second, UnschedulableTimeout: time.Minute, Now: c.Now,
		Gate: func(p *corev1.Pod) bool { return p.Labels["ready"] == "yes" },
	})
	pod := makePod("p").Obj()
	q.Add(pod)
	if got := q.Where(pod.UID); got != Gated {
		t.Fatalf("pod refused by the gate in %q, want gated", got)
	}
	if a, b, u := q.Len(); a != 0 || b != 0 || u != 1 {
		t.Fatalf("Len = %d, %d, %d; want a gated pod counted as unschedulable only", a, b, u)
	}
	q.OnEvent(ev(framework.Node, framework.Add), nil, makeNode("n").Obj())
	c.Step(2 * time.Minute)
	q.Flush()
	q.Add(pod)
	still := pod.DeepCopy()
	still.Annotations = map[string]string{"x": "y"}
	q.Update(pod, still)
	if got := q.Where(pod.UID); got != Gated {
		t.Fatalf("after an event, the safety net and updates that do not pass the gate: %q, want gated", got)
	}
	ready := still.DeepCopy()
	ready.Labels = map[string]string{"ready": "yes"}
	q.Update(still, ready)
	if got := q.Where(pod.UID); got != Active {
		t.Fatalf("after an update that passes the gate: %q, want active", got)
	}
	if qp := pop(t, q); qp.Pod != ready || qp.Attempts != 1 {
		t.Fatalf("popped %s (attempt %d), want the updated pod's first attempt", qp.Pod.Name, qp.Attempts)
	}

	other := makePod("other").Obj()
	q.Add(other)
	q.Delete(other)
	if got := q.Where(other.UID); got != Absent {
		t.Fatalf("deleted gated pod in %q, want gone", got)
	}
}

// An idle scheduler takes a pod that an event moved to backoff without
// waiting for its backoff to end; a pod backing off after an error waits.
func TestIdlePopTakesMovedPodFromBackoff(t *testing.T) {
	q, _ := newQueue(t)
	moved := makePod("moved").Req("cpu", "2").Obj()
	parkForCPU(t, q, moved)
	q.OnEvent(ev(framework.AssignedPod, framework.Delete), makePod("x").Obj(), nil)
	if q.Where(moved.UID) != Backoff {
		t.Fatalf("pod in %q, want backoff", q.Where(moved.UID))
	}
	failed := makePod("failed").Obj()
	q.Add(failed)
	q.Backoff(pop(t, q))
	done := make(chan *QueuedPod, 2)
	go func() {
		for range 2 {
			qp, err := q.Pop()
			if err != nil {
				close(done)
				return
			}
			done <- qp
		}
	}()
	select {
	case qp := <-done:
		if qp.Pod.Name != "moved" {
			t.Fatalf("popped %s first, want the moved pod", qp.Pod.Name)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("an idle Pop did not take the moved pod out of backoff")
	}
	select {
	case qp := <-done:
		t.Fatalf("popped %v before its error backoff ended", qp)
	case <-time.After(50 * time.Millisecond):
	}
	if q.Where(failed.UID) != Backoff {
		t.Fatalf("errored pod in %q, want backoff", q.Where(failed.UID))
	}
	q.Close()
}
