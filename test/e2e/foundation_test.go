package e2e

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	clientv3 "go.etcd.io/etcd/client/v3"
	"sigs.k8s.io/yaml"

	"allot.dev/allot/internal/storage/storagetest"
)

// TestFoundationEmbedded runs the foundation suite against `allot up` with
// its embedded etcd.
func TestFoundationEmbedded(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	// The suite compares every object before and after a restart, so the
	// seed's agent-less worker-1 must not be marked NotReady meanwhile.
	c.start(t, "--node-monitor-grace-period", "1h")
	requireDataDir(t, c, true)
	runFoundationSuite(t, c)
}

// TestFoundationExternalEtcd runs the foundation suite against `allot up
// --etcd-servers` with a real 3-member etcd cluster, then stops one member
// and writes, watches and restarts through the remaining two.
func TestFoundationExternalEtcd(t *testing.T) {
	t.Parallel()
	requireEtcdBinary(t)
	endpoints, stopMember := storagetest.StartExternalCluster(t, 3)
	c := newCluster(t)
	c.start(t, "--etcd-servers", strings.Join(endpoints, ","), "--node-monitor-grace-period", "1h")
	requireDataDir(t, c, false)
	if !runFoundationSuite(t, c) {
		return
	}
	t.Run("one member stopped", func(t *testing.T) { stepMemberStopped(t, c, endpoints, stopMember) })
}

// requireEtcdBinary fails the test when no etcd binary is found and CI=true
// or ALLOT_REQUIRE_ETCD=1; otherwise StartExternalCluster skips it.
func requireEtcdBinary(t *testing.T) {
	t.Helper()
	if storagetest.EtcdBinary() != "" {
		return
	}
	if os.Getenv("CI") == "true" || os.Getenv(storagetest.EnvRequireEtcd) == "1" {
		t.Fatalf("etcd binary not found on PATH (Debian: apt-get install etcd-server; or set %s), and CI=true or %s=1",
			storagetest.EnvEtcdBinary, storagetest.EnvRequireEtcd)
	}
}

// requireDataDir checks what `allot up` keeps in its data dir: tokens,
// certificates, the kubeconfig with the CA embedded, and etcd's data only
// when etcd is embedded.
func requireDataDir(t *testing.T, c *cluster, embeddedEtcd bool) {
	t.Helper()
	for _, name := range []string{"tokens.csv", "pki", "kubeconfig"} {
		if _, err := os.Stat(filepath.Join(c.dataDir, name)); err != nil {
			t.Errorf("data dir after allot up: %v", err)
		}
	}
	_, err := os.Stat(filepath.Join(c.dataDir, "etcd"))
	if embeddedEtcd && err != nil {
		t.Errorf("data dir after allot up with embedded etcd: %v", err)
	}
	if !embeddedEtcd && err == nil {
		t.Errorf("data dir after allot up --etcd-servers has an etcd dir; want no embedded etcd")
	}
	data, err := os.ReadFile(c.kubeconfig)
	if err != nil {
		t.Fatalf("read kubeconfig: %v", err)
	}
	var kc map[string]any
	if err := yaml.Unmarshal(data, &kc); err != nil {
		t.Fatalf("decode kubeconfig: %v", err)
	}
	requireFields(t, "kubeconfig", kc, map[string]any{
		"clusters.0.cluster.server":                     c.url,
		"clusters.0.cluster.certificate-authority-data": nonEmpty,
		"users.0.user.token":                            nonEmpty,
	})
}

// stepMemberStopped stops the first etcd member (the first endpoint allot
// was given), then requires writes, a running watch and a restart to work
// through the two that remain.
func stepMemberStopped(t *testing.T, c *cluster, endpoints []string, stopMember func(int)) {
	w := c.kubectlWatch(t, "get", "pods", "-n", ns, "-w", "-o", podWatchFormat)
	if _, _, err := w.Stdout.WaitFor(0, watchTimeout, func(s string) bool { return s == "web stage=watched" }); err != nil {
		t.Fatalf("kubectl get pods -w: initial list has no line %q: %v\nstdout:\n%s\nstderr:\n%s", "web stage=watched", err, w.Stdout, w.Stderr)
	}
	stopped := memberID(t, endpoints[0])
	stopMember(0)
	t.Logf("stopped etcd member %x at %s", stopped, endpoints[0])
	waitForLeader(t, endpoints[1:], stopped)

	out := c.kubectl(t, "create", "-f", "testdata/degraded.yaml")
	requireLines(t, "kubectl create -f degraded.yaml with a member stopped", out,
		"namespace/degraded created", "pod/survivor created",
		"resourceclaim.resource.k8s.io/survivor-claim created",
		"cardparameters.dra.example.com/survivor-params created")
	requireLines(t, "kubectl label with a member stopped", c.kubectl(t, "label", "pod", "web", "-n", ns, "stage=degraded", "--overwrite"),
		"pod/web labeled")
	requireLines(t, "kubectl replace with a member stopped", c.kubectl(t, "replace", "-f", "testdata/web-replaced.yaml"),
		"pod/web replaced")
	requireDeleted(t, "kubectl delete with a member stopped", c.kubectl(t, "delete", "pod", "late", "-n", ns), `pod "late" deleted`)
	if _, _, err := w.Stdout.WaitFor(0, watchTimeout, func(s string) bool { return s == "web stage=degraded" }); err != nil {
		t.Errorf("kubectl get pods -w started before the member stopped did not show the label change (want line %q): %v\nstdout:\n%s\nstderr:\n%s",
			"web stage=degraded", err, w.Stdout, w.Stderr)
	}
	w.Kill()

	before := c.snapshot(t)
	for _, id := range []objectID{{"Namespace", "", "degraded"}, {"Pod", "degraded", "survivor"},
		{"ResourceClaim", "degraded", "survivor-claim"}, {"CardParameters", "degraded", "survivor-params"}} {
		if _, ok := before[id]; !ok {
			t.Errorf("with a member stopped: kubectl get lists no %s", id)
		}
	}
	c.restart(t)
	requireSameObjects(t, before, c.snapshot(t))
	c.kubectlExpectFail(t, "get", "pod", "late", "-n", ns)
	got := c.jsonpath(t, "{.metadata.labels.tier} {.metadata.labels.stage}", "pod", "web", "-n", ns)
	if got != "frontend " {
		t.Errorf("after restart with a member stopped: pod web labels tier stage = %q, want %q (replace dropped stage)", got, "frontend ")
	}
}

// memberID returns the etcd member ID serving endpoint.
func memberID(t *testing.T, endpoint string) uint64 {
	t.Helper()
	cli := storagetest.NewClient(t, []string{endpoint})
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	st, err := cli.Status(ctx, endpoint)
	if err != nil {
		t.Fatalf("etcd status of %s: %v", endpoint, err)
	}
	return st.Header.MemberId
}

// waitForLeader waits until every live member agrees on a leader other than
// the stopped member, so that the writes that follow meet a cluster with
// quorum rather than an election in progress.
func waitForLeader(t *testing.T, live []string, stopped uint64) {
	t.Helper()
	cli := storagetest.NewClient(t, live)
	deadline := time.Now().Add(90 * time.Second)
	for {
		leader, err := agreedLeader(cli, live)
		if err == nil && leader != 0 && leader != stopped {
			t.Logf("etcd leader is now %x", leader)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("etcd members %v: no agreed leader other than the stopped %x after 90s (leader %x, err %v)", live, stopped, leader, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func agreedLeader(cli *clientv3.Client, endpoints []string) (uint64, error) {
	var leader uint64
	for i, ep := range endpoints {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		st, err := cli.Status(ctx, ep)
		cancel()
		if err != nil {
			return 0, fmt.Errorf("status of %s: %w", ep, err)
		}
		if i > 0 && st.Leader != leader {
			return 0, fmt.Errorf("%s sees leader %x, another member %x", ep, st.Leader, leader)
		}
		leader = st.Leader
	}
	return leader, nil
}
