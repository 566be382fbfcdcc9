package hosts

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

// recovery is what one node-loss scenario measured, each time since the
// link was cut ("-" when not seen).
type recovery struct {
	scenario                                 string
	notReady, taint, evicted, gone, released time.Duration
	replacementRunning                       time.Duration
	back, clean                              time.Duration // since the link was restored: node Ready, its old pod's containers and claim gone
}

func (r recovery) String() string {
	d := func(d time.Duration) string {
		if d == 0 {
			return "-"
		}
		return d.Round(10 * time.Millisecond).String()
	}
	return fmt.Sprintf("%s: link cut -> NotReady %s, NoExecute taint %s, pod evicted %s, pod gone %s, claim released %s, replacement Running %s; link restored -> node Ready %s, clean %s",
		r.scenario, d(r.notReady), d(r.taint), d(r.evicted), d(r.gone), d(r.released), d(r.replacementRunning), d(r.back), d(r.clean))
}

// loseNode runs one node-loss scenario: a pod with a node-local claim
// runs on lost; lost's link is cut (and, with deleteNode, its Node
// deleted at once, as an operator does for a machine gone for good); the
// test waits for each step of the recovery, creating the replacement
// pod on spare once the first pod is evicted, as a ReplicaSet would;
// then the link comes back and the node must find its old pod gone and
// clean up after it: no container left, its claim unprepared in the
// driver's own records.
func loseNode(t *testing.T, c *cluster, lost, spare *node, deleteNode bool, prefix string) recovery {
	t.Helper()
	r := recovery{scenario: prefix}
	first, second := prefix+"-a", prefix+"-b"
	c.createPod(t, newPod(first, onNode(lost), tolerateLoss))
	p := c.waitRunning(t, first)
	claim, uid := c.claimOf(t, p)
	waitFor(t, 30*time.Second, "claim "+claim+" prepared on "+lost.name, func() bool { return lost.lastStateLine(t, uid) == "prepare" })

	cut := time.Now()
	lost.host.cut(t)
	since := func() time.Duration { return time.Since(cut) }
	if deleteNode {
		if err := c.admin.Nodes().Delete(ctx(t), lost.name, metav1.DeleteOptions{}); err != nil {
			t.Fatalf("delete node %s: %v", lost.name, err)
		}
	}
	replaced := false
	waitFor(t, 90*time.Second, "the recovery of "+lost.name+"'s pod", func() bool {
		if n, err := c.admin.Nodes().Get(ctx(t), lost.name); err == nil {
			if r.notReady == 0 && !nodeReady(n) {
				r.notReady = since()
			}
			if r.taint == 0 && slices.ContainsFunc(n.Spec.Taints, func(tn corev1.Taint) bool {
				return tn.Key == corev1.TaintNodeUnreachable && tn.Effect == corev1.TaintEffectNoExecute
			}) {
				r.taint = since()
			}
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
			c.createPod(t, newPod(second, onNode(spare)))
			replaced = true
		}
		if replaced && r.replacementRunning == 0 {
			if p := c.pod(t, second); p != nil && p.Status.Phase == corev1.PodRunning {
				r.replacementRunning = since()
			}
		}
		if deleteNode {
			return r.gone != 0 && r.released != 0 && r.replacementRunning != 0
		}
		// Without the Node deleted the claim may stay with the pod while
		// the node is cut off (it may still run it); a release is
		// recorded if it comes within a second of the replacement.
		return r.taint != 0 && r.evicted != 0 && r.replacementRunning != 0 && (r.released != 0 || since() > r.replacementRunning+time.Second)
	})
	// Cut off, the node keeps running the pod: only pods holding devices
	// other nodes can reach are stopped there (the fence).
	if got := lost.running(t, first); len(got) != 1 {
		t.Errorf("%s's running containers on %s while it was cut off: %v, want its one container", first, lost.name, got)
	}
	if lost.lastStateLine(t, uid) != "prepare" {
		t.Errorf("claim %s unprepared on %s while it was cut off: nothing reached it", claim, lost.name)
	}

	restored := time.Now()
	lost.host.restore(t)
	c.waitNodeReady(t, lost)
	r.back = time.Since(restored)
	waitFor(t, 60*time.Second, first+" gone, its containers removed and claim "+claim+" unprepared on "+lost.name, func() bool {
		return c.pod(t, first) == nil && len(lost.containers(t, first)) == 0 && lost.lastStateLine(t, uid) == "unprepare" &&
			c.claimReleased(t, claim)
	})
	r.clean = time.Since(restored)
	if vs := lost.checkDriver(t); len(vs) > 0 {
		t.Errorf("%s's driver records after its return: %v", lost.name, vs)
	}
	c.deletePods(t, second)
	// Stays clean: nothing of the old pod came back while the node
	// resynced.
	if got := lost.containers(t, first); len(got) > 0 {
		t.Errorf("containers of %s back on %s: %s", first, lost.name, strings.Join(got, ", "))
	}
	t.Log(r)
	return r
}
