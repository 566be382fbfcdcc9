package hosts

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// fenceFlags are the extra flags of node agents and controller managers
// for the self-fence: the node stops pods holding devices other nodes can
// reach after tm.fenceAfter without a heartbeat; the controller manager
// releases their claims after the fence time plus its margin.
func fenceFlags() (nodeFlags, managerFlags []string) {
	return []string{"--self-fence-after", tm.fenceAfter.String()}, []string{"--fence-margin", tm.fenceMargin.String()}
}

// fence is the self-fence scenario: both units of the shared pool are
// held, one by a pod on lost; lost's link is cut (and, with deleteNode,
// its Node deleted at once); lost stops that pod and unprepares its claim
// (the fence), and once the fence time plus the margin has passed since
// its last heartbeat the claim controller releases the claim and a
// replacement pod on spare gets the unit. At no sampled moment is a unit
// attached on two nodes, by the fabric plugins' own records. The link
// comes back and lost stays clean.
func fence(t *testing.T, c *cluster, lost, holder, spare *node, deleteNode bool, prefix string) recovery {
	t.Helper()
	r := recovery{scenario: prefix}
	first, second, hold := prefix+"-a", prefix+"-b", prefix+"-hold"
	c.createPod(t, newPod(hold, fabricUnit, onNode(holder)))
	c.createPod(t, newPod(first, fabricUnit, onNode(lost), tolerateLoss))
	p := c.waitRunning(t, first)
	c.waitRunning(t, hold)
	claim, uid := c.claimOf(t, p)
	var unit string
	waitFor(t, 30*time.Second, "claim "+claim+"'s unit attached on "+lost.name, func() bool {
		for u, owner := range lost.attached(t) {
			if owner == uid {
				unit = u
			}
		}
		return unit != ""
	})
	watch := startUnitWatch(t, append(slices.DeleteFunc(slices.Clone(c.nodes), func(n *node) bool { return n == lost }), lost))

	cut := time.Now()
	since := func() time.Duration { return time.Since(cut) }
	lost.host.cut(t)
	if deleteNode {
		if err := c.admin.Nodes().Delete(ctx(t), lost.name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete node %s: %v", lost.name, err)
		}
	}
	var fenced time.Duration
	replaced := false
	waitFor(t, 90*time.Second, "unit "+unit+" attached on "+spare.name+" for a replacement pod", func() bool {
		if fenced == 0 && lost.attached(t)[unit] == "" && len(lost.running(t, first)) == 0 {
			fenced = since()
		}
		got := c.pod(t, first)
		if r.evicted == 0 && (got == nil || got.DeletionTimestamp != nil) {
			r.evicted = since()
		}
		if r.gone == 0 && got == nil {
			r.gone = since()
		}
		if r.released == 0 && c.claimReleased(t, claim) {
			r.released = since()
		}
		if r.evicted != 0 && !replaced {
			c.createPod(t, newPod(second, fabricUnit, onNode(spare)))
			replaced = true
		}
		if replaced && r.replacementRunning == 0 {
			if p := c.pod(t, second); p != nil && p.Status.Phase == corev1.PodRunning {
				r.replacementRunning = since()
			}
		}
		return r.replacementRunning != 0 && spare.attached(t)[unit] != ""
	})
	if fenced == 0 {
		t.Errorf("%s attached on %s for a pod elsewhere while %s had not fenced (%s's running containers: %v, its units: %v)", unit, spare.name, lost.name, first, lost.running(t, first), lost.attached(t))
	}
	// The node's last heartbeat came before the cut by at most its
	// interval; its claim may be released only after the fence time
	// (plus the margin) has passed since then, Node deleted or not.
	if r.released != 0 && r.released < tm.fenceAfter-tm.heartbeat {
		t.Errorf("claim %s released %v after %s's link was cut, before its fence time %v had passed since its last heartbeat", claim, r.released, lost.name, tm.fenceAfter)
	}
	t.Logf("%s: link cut -> %s fenced (%s stopped, %s detached) %v", prefix, lost.name, first, unit, fenced.Round(10*time.Millisecond))

	restored := time.Now()
	lost.host.restore(t)
	c.waitNodeReady(t, lost)
	r.back = time.Since(restored)
	waitFor(t, 60*time.Second, first+" gone and its containers removed on "+lost.name, func() bool {
		return c.pod(t, first) == nil && len(lost.containers(t, first)) == 0 && lost.attached(t)[unit] == ""
	})
	r.clean = time.Since(restored)
	c.deletePods(t, second, hold)
	vs, samples := watch.stop()
	for _, v := range vs {
		t.Errorf("violation: %s", v)
	}
	t.Logf("the fabric plugins' attach directories read %d times: no unit attached on two nodes", samples)
	t.Log(r)
	return r
}

// unitWatch samples the fabric plugins' attach directories every 20ms
// and records any unit attached on two nodes at once. Nodes are read in
// the order given, the lost node last: a unit moving from it to another
// node between two reads is seen on at most one of them (the other node,
// read first, did not have it yet; or the lost one, read last, no longer).
type unitWatch struct {
	cancel  context.CancelFunc
	done    chan struct{}
	mu      sync.Mutex
	seen    []string
	samples int
}

func startUnitWatch(t *testing.T, nodes []*node) *unitWatch {
	sctx, cancel := context.WithCancel(t.Context())
	w := &unitWatch{cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(w.done)
		for sctx.Err() == nil {
			where := map[string]string{}
			for i := range nodes {
				for u, claim := range nodes[i].attachedNow() {
					if other, ok := where[u]; ok {
						w.record(fmt.Sprintf("unit %s attached on %s (claim %s) and %s at once", u, nodes[i].name, claim, other))
					}
					where[u] = nodes[i].name + " (claim " + claim + ")"
				}
			}
			w.mu.Lock()
			w.samples++
			w.mu.Unlock()
			select {
			case <-sctx.Done():
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	t.Cleanup(cancel)
	return w
}

func (w *unitWatch) record(v string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	for _, s := range w.seen {
		if s == v {
			return
		}
	}
	w.seen = append(w.seen, v)
}

// stop ends the watch: what it saw, and how many samples it took.
func (w *unitWatch) stop() ([]string, int) {
	w.cancel()
	<-w.done
	return w.seen, w.samples
}
