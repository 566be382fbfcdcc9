package node_test

import (
	"fmt"
	"io"
	"strings"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/pkg/client"
)

func readyCondition(n *corev1.Node) *corev1.NodeCondition {
	for i := range n.Status.Conditions {
		if n.Status.Conditions[i].Type == corev1.NodeReady {
			return &n.Status.Conditions[i]
		}
	}
	return nil
}

func waitNodeReady(t *testing.T, c *client.Client, name string) *corev1.Node {
	t.Helper()
	var n *corev1.Node
	eventually(t, 60*time.Second, "node "+name+" Ready", func() (bool, string) {
		var err error
		if n, err = c.Nodes().Get(callContext(t), name); err != nil {
			return false, err.Error()
		}
		r := readyCondition(n)
		return r != nil && r.Status == corev1.ConditionTrue, ""
	})
	return n
}

func TestNodeRegistersAndHeartbeats(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	name := testName(t)
	cfg := agentConfig(t, c, name, t.TempDir())
	cfg.NodeStatusReportFrequency = 500 * time.Millisecond // the status, unchanged, is written this often
	startAgent(t, cfg)

	n := waitNodeReady(t, c, name)
	if q := n.Status.Capacity[corev1.ResourcePods]; q.Value() != node.DefaultMaxPods {
		t.Errorf("pods capacity %s, want %d", q.String(), node.DefaultMaxPods)
	}
	if q := n.Status.Allocatable[corev1.ResourceCPU]; q.IsZero() {
		t.Errorf("no allocatable cpu: %+v", n.Status.Allocatable)
	}
	for k, v := range map[string]string{node.LabelHostname: name, "test": "node", node.LabelCDI: "true"} {
		if n.Labels[k] != v {
			t.Errorf("label %s = %q, want %q", k, n.Labels[k], v)
		}
	}
	if n.Status.DaemonEndpoints.KubeletEndpoint.Port == 0 {
		t.Error("no kubelet endpoint port")
	}
	if len(n.Status.Addresses) != 2 || n.Status.Addresses[0] != (corev1.NodeAddress{Type: corev1.NodeInternalIP, Address: "127.0.0.1"}) {
		t.Errorf("addresses %+v", n.Status.Addresses)
	}
	if !strings.HasPrefix(n.Status.NodeInfo.ContainerRuntimeVersion, "fake://") {
		t.Errorf("runtime version %q", n.Status.NodeInfo.ContainerRuntimeVersion)
	}

	first := readyCondition(n).LastHeartbeatTime
	eventually(t, 30*time.Second, "lastHeartbeatTime to advance", func() (bool, string) {
		cur, err := c.Nodes().Get(callContext(t), name)
		if err != nil {
			return false, err.Error()
		}
		r := readyCondition(cur)
		return r != nil && r.LastHeartbeatTime.After(first.Time), ""
	})
}

// TestNodeHeartbeatsThroughLease: the agent renews kube-node-lease/NAME
// (held by the node, owned by its Node) every heartbeat, and writes the
// Node's status only when something in it changes or the report
// frequency has passed (an hour here): no Node write while the Lease is
// renewed five times. Five heartbeats with nothing to report are enough:
// each would have written the status before Leases.
func TestNodeHeartbeatsThroughLease(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	name := testName(t)
	cfg := agentConfig(t, c, name, t.TempDir())
	cfg.NodeStatusReportFrequency = time.Hour
	startAgent(t, cfg)
	n := waitNodeReady(t, c, name)

	leases := c.Leases(corev1.NamespaceNodeLease)
	var renewals []time.Time
	var rv string
	eventually(t, 30*time.Second, "five lease renewals", func() (bool, string) {
		l, err := leases.Get(callContext(t), name)
		if err != nil {
			return false, err.Error()
		}
		if l.Spec.HolderIdentity == nil || *l.Spec.HolderIdentity != name || l.Spec.LeaseDurationSeconds == nil || *l.Spec.LeaseDurationSeconds != 40 {
			return false, fmt.Sprintf("lease spec %+v", l.Spec)
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID || l.OwnerReferences[0].Kind != "Node" {
			return false, fmt.Sprintf("lease owners %+v, want the Node %s", l.OwnerReferences, n.UID)
		}
		if l.Spec.RenewTime == nil {
			return false, "no renewTime"
		}
		if rv == "" {
			// Counting starts once the Lease exists: the Node as it is now
			// must not be written again.
			cur, err := c.Nodes().Get(callContext(t), name)
			if err != nil {
				return false, err.Error()
			}
			rv = cur.ResourceVersion
		}
		if len(renewals) == 0 || l.Spec.RenewTime.After(renewals[len(renewals)-1]) {
			renewals = append(renewals, l.Spec.RenewTime.Time)
		}
		return len(renewals) > 5, fmt.Sprintf("%d renewals", len(renewals))
	})
	cur, err := c.Nodes().Get(callContext(t), name)
	if err != nil {
		t.Fatal(err)
	}
	if cur.ResourceVersion != rv {
		t.Errorf("Node written while only the Lease needed renewing (resourceVersion %s -> %s)", rv, cur.ResourceVersion)
	}
}

// A Node deleted while its agent runs, its Lease collected with it (as the
// garbage collector does), is registered again at the next heartbeat,
// though no status write was due: the Lease had to be created again, so
// the agent checks its Node. The new Lease is owned by the new Node.
func TestDeletedNodeWithItsLeaseRegistersAgain(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	name := testName(t)
	cfg := agentConfig(t, c, name, t.TempDir())
	cfg.NodeStatusReportFrequency = time.Hour
	startAgent(t, cfg)
	old := waitNodeReady(t, c, name)
	leases := c.Leases(corev1.NamespaceNodeLease)
	eventually(t, 30*time.Second, "the Lease", func() (bool, string) {
		_, err := leases.Get(callContext(t), name)
		return err == nil, fmt.Sprint(err)
	})
	if err := c.Nodes().Delete(callContext(t), name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if err := leases.Delete(callContext(t), name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	eventually(t, 30*time.Second, "the Node registered again, its Lease owned by it", func() (bool, string) {
		n, err := c.Nodes().Get(callContext(t), name)
		if err != nil {
			return false, err.Error()
		}
		if n.UID == old.UID {
			return false, "the old Node"
		}
		l, err := leases.Get(callContext(t), name)
		if err != nil {
			return false, err.Error()
		}
		if len(l.OwnerReferences) != 1 || l.OwnerReferences[0].UID != n.UID {
			return false, fmt.Sprintf("lease owners %+v, want the new Node %s", l.OwnerReferences, n.UID)
		}
		return true, ""
	})
}

func TestPodRunsThenSucceeds(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	startAgent(t, agentConfig(t, c, name, t.TempDir()))
	waitNodeReady(t, c, name)

	makePod(ns, "job", name).initContainer("setup").exitAfter("1500ms", 0).policy(corev1.RestartPolicyNever).create(t, c)
	p := waitPod(t, c, ns, "job", "Running", running)
	if p.Status.StartTime == nil || p.Status.PodIP != "127.0.0.1" {
		t.Errorf("startTime %v podIP %q", p.Status.StartTime, p.Status.PodIP)
	}
	if init := p.Status.InitContainerStatuses; len(init) != 1 || init[0].State.Terminated == nil || init[0].State.Terminated.ExitCode != 0 {
		t.Errorf("init statuses %+v", init)
	}
	p = waitPod(t, c, ns, "job", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	cs := p.Status.ContainerStatuses
	if len(cs) != 1 || cs[0].State.Terminated == nil || cs[0].State.Terminated.Reason != "Completed" {
		t.Errorf("container statuses %+v", cs)
	}
	conds := map[corev1.PodConditionType]corev1.ConditionStatus{}
	for _, c := range p.Status.Conditions {
		conds[c.Type] = c.Status
	}
	if conds[corev1.PodInitialized] != corev1.ConditionTrue || conds[corev1.PodReady] != corev1.ConditionFalse {
		t.Errorf("conditions %+v", p.Status.Conditions)
	}
}

func TestFailingContainerRestartsWithBackoff(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	startAgent(t, agentConfig(t, c, name, t.TempDir()))

	makePod(ns, "crash", name).exitAfter("100ms", 3).create(t, c)
	p := waitPod(t, c, ns, "crash", "two restarts", func(p *corev1.Pod) bool {
		cs := p.Status.ContainerStatuses
		return len(cs) == 1 && cs[0].RestartCount >= 2
	})
	last := p.Status.ContainerStatuses[0].LastTerminationState.Terminated
	if last == nil || last.ExitCode != 3 {
		t.Errorf("lastState %+v, want exit code 3", p.Status.ContainerStatuses[0].LastTerminationState)
	}
	if p.Status.Phase != corev1.PodRunning {
		t.Errorf("phase %s, want Running while restarting", p.Status.Phase)
	}
}

func TestDeletionCompletes(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	startAgent(t, agentConfig(t, c, name, t.TempDir()))

	makePod(ns, "svc", name).create(t, c)
	waitPod(t, c, ns, "svc", "Running", running)
	if err := c.Pods(ns).Delete(callContext(t), "svc", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitPodGone(t, c, ns, "svc")
}

func TestLogsThroughAPIServer(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	startAgent(t, agentConfig(t, c, name, t.TempDir()))

	makePod(ns, "talker", name).create(t, c)
	waitPod(t, c, ns, "talker", "Running", running)
	rc, err := c.Logs(callContext(t), ns, "talker", "main", false, -1)
	if err != nil {
		t.Fatalf("logs: %v", err)
	}
	defer rc.Close()
	out, err := io.ReadAll(rc)
	if err != nil {
		t.Fatalf("read logs: %v", err)
	}
	if want := "fake container main of pod " + ns + "/talker started"; !strings.Contains(string(out), want) {
		t.Fatalf("logs %q, want %q", out, want)
	}
}

func TestRestartedAgentAdoptsContainers(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	root := t.TempDir()
	stop := startAgent(t, agentConfig(t, c, name, root))

	makePod(ns, "long", name).create(t, c)
	before := waitPod(t, c, ns, "long", "Running", running).Status.ContainerStatuses[0]
	stop()

	startAgent(t, agentConfig(t, c, name, root))
	// The new agent's first sync rewrites nothing if it adopted the same
	// container; give it time to act, then compare.
	time.Sleep(2 * time.Second)
	after := waitPod(t, c, ns, "long", "Running", running).Status.ContainerStatuses[0]
	if after.ContainerID != before.ContainerID || after.RestartCount != 0 ||
		after.State.Running == nil || !after.State.Running.StartedAt.Equal(&before.State.Running.StartedAt) {
		t.Fatalf("container not adopted:\n before %+v\n after  %+v", before, after)
	}
	if err := c.Pods(ns).Delete(callContext(t), "long", metav1.DeleteOptions{}); err != nil {
		t.Fatalf("delete: %v", err)
	}
	waitPodGone(t, c, ns, "long")
}

func TestFinishedPodNotRerunAfterRestart(t *testing.T) {
	needCluster(t)
	c := newClient(t)
	ns := newNamespace(t, c)
	name := testName(t)
	root := t.TempDir()
	stop := startAgent(t, agentConfig(t, c, name, root))

	makePod(ns, "once", name).exitAfter("200ms", 0).policy(corev1.RestartPolicyOnFailure).create(t, c)
	done := waitPod(t, c, ns, "once", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	stop()
	startAgent(t, agentConfig(t, c, name, root))
	time.Sleep(2 * time.Second)
	after := waitPod(t, c, ns, "once", "Succeeded", func(p *corev1.Pod) bool { return p.Status.Phase == corev1.PodSucceeded })
	if after.ResourceVersion != done.ResourceVersion {
		t.Fatalf("finished pod was written again: %+v", after.Status)
	}
}
