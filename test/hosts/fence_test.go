package hosts

import (
	"context"
	"fmt"
	"os/exec"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
)

// fenceFlags are the extra flags of node agents and controller managers
// for the self-fence (issue 29 point 1), empty while the binary lacks
// --self-fence-after: the node stops pods holding devices other nodes
// can reach after tm.fenceAfter without a heartbeat; the controller manager
// releases their claims after the fence time plus its margin.
func fenceFlags(t *testing.T) (nodeFlags, managerFlags []string) {
	t.Helper()
	if !strings.Contains(help(t, "node"), "--self-fence-after") {
		return nil, nil
	}
	nodeFlags = []string{"--self-fence-after", tm.fenceAfter.String()}
	if m := regexp.MustCompile(`--[a-z-]*fence[a-z-]*margin[a-z-]*`).FindString(help(t, "controller-manager")); m != "" {
		managerFlags = []string{m, tm.fenceMargin.String()}
	}
	return nodeFlags, managerFlags
}

func help(t *testing.T, cmd string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	out, err := exec.CommandContext(ctx, allotBin, cmd, "--help").CombinedOutput()
	if err != nil {
		t.Fatalf("allot %s --help: %v: %s", cmd, err, out)
	}
	return string(out)
}

// fence is the self-fence scenario: both units of the shared pool are
// held, one by a pod on lost; lost's link is cut; lost stops that pod and
// unprepares its claim (the fence), and once the fence time plus the
// margin has passed the controller releases the claim and a replacement
// pod on spare gets the unit. At no sampled moment is a unit attached on
// two nodes, by the fabric plugins' own records. The link comes back and
// lost stays clean.
func fence(t *testing.T, c *cluster, lost, holder, spare *node) recovery {
	t.Helper()
	if !c.fenced {
		t.Skip("needs the self-fence (issue 29 point 1): allot node has no --self-fence-after")
	}
	r := recovery{scenario: "fence"}
	c.createPod(t, newPod("fence-hold", fabricUnit, onNode(holder)))
	c.createPod(t, newPod("fence-a", fabricUnit, onNode(lost), tolerateLoss))
	p := c.waitRunning(t, "fence-a")
	c.waitRunning(t, "fence-hold")
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
	watch := startUnitWatch(t, c.nodes)

	cut := time.Now()
	since := func() time.Duration { return time.Since(cut) }
	lost.host.cut(t)
	var fenced time.Duration
	replaced := false
	waitFor(t, 90*time.Second, "unit "+unit+" attached on "+spare.name+" for a replacement pod", func() bool {
		if fenced == 0 && lost.attached(t)[unit] == "" && len(lost.running(t, "fence-a")) == 0 {
			fenced = since()
		}
		got := c.pod(t, "fence-a")
		if r.evicted == 0 && (got == nil || got.DeletionTimestamp != nil) {
			r.evicted = since()
		}
		if r.released == 0 && c.claimReleased(t, claim) {
			r.released = since()
		}
		if r.evicted != 0 && !replaced {
			c.createPod(t, newPod("fence-b", fabricUnit, onNode(spare)))
			replaced = true
		}
		if replaced && r.replacementRunning == 0 {
			if p := c.pod(t, "fence-b"); p != nil && p.Status.Phase == corev1.PodRunning {
				r.replacementRunning = since()
			}
		}
		return r.replacementRunning != 0 && spare.attached(t)[unit] != ""
	})
	if fenced == 0 {
		t.Errorf("%s attached on %s for a pod elsewhere while %s had not fenced (fence-a's running containers: %v, its units: %v)", unit, spare.name, lost.name, lost.running(t, "fence-a"), lost.attached(t))
	}
	// The node's last heartbeat came before the cut by at most its
	// interval; its claim may be released only after the fence time
	// (plus the margin) has passed since then.
	if r.released != 0 && r.released < tm.fenceAfter-tm.heartbeat {
		t.Errorf("claim %s released %v after %s's link was cut, before its fence time %v had passed since its last heartbeat", claim, r.released, lost.name, tm.fenceAfter)
	}
	t.Logf("fence: link cut -> %s fenced (fence-a stopped, %s detached) %v", lost.name, unit, fenced.Round(10*time.Millisecond))

	restored := time.Now()
	lost.host.restore(t)
	c.waitNodeReady(t, lost)
	r.back = time.Since(restored)
	waitFor(t, 60*time.Second, "fence-a gone and its containers removed on "+lost.name, func() bool {
		return c.pod(t, "fence-a") == nil && len(lost.containers(t, "fence-a")) == 0 && lost.attached(t)[unit] == ""
	})
	r.clean = time.Since(restored)
	c.deletePods(t, "fence-b", "fence-hold")
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
// reverse order, the lost node (index 0) last: a unit moving from it to
// another node between two reads is seen on at most one of them.
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
			for i := len(nodes) - 1; i >= 0; i-- {
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
