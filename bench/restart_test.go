package bench

import (
	"context"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"syscall"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
)

// BenchmarkAPIServerRestart measures how long the garbage collector and
// the claim controller take to resume after the API server comes back.
// It runs `allot apiserver` (embedded etcd, as allot up) and `allot
// controller-manager` as two processes. Each round creates ten pods with
// a claim from a template (no scheduler: the claims stay unallocated),
// waits for their ten generated claims, deletes the pods, kills the API
// server (SIGKILL) at once, keeps it down for ALLOT_BENCH_DOWN (10s),
// starts it again on the same port and data dir, and polls until the ten
// claims are gone. It reports the time from the API server's return
// (first /readyz answer) to the last claim's deletion: min, median, p90
// and max over ALLOT_BENCH_ROUNDS rounds (default 1, a smoke run; the
// numbers in bench/README.md are from 15 and 25), and logs every round.
//
// The controller manager keeps running across rounds, as it does when an
// operator restarts only the API server; rounds follow each other within
// the reflector's two-minute back-off reset, as repeated restarts do.
//
//	ALLOT_BENCH_ROUNDS=15 go test ./bench/ -run '^$' -bench APIServerRestart -benchtime 1x -timeout 40m -v
func BenchmarkAPIServerRestart(b *testing.B) {
	rounds := envInt("ALLOT_BENCH_ROUNDS", 1) // one for the smoke run of hack/test.sh
	down := 10 * time.Second
	if s := os.Getenv("ALLOT_BENCH_DOWN"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			b.Fatalf("ALLOT_BENCH_DOWN: %v", err)
		}
		down = d
	}
	if testing.Short() {
		rounds, down = 1, 2*time.Second
	}
	dir := b.TempDir()
	bin := filepath.Join(dir, "allot")
	build := exec.Command("go", "build", "-o", bin, "../cmd/allot")
	build.Stderr = os.Stderr
	if err := build.Run(); err != nil {
		b.Fatalf("build allot: %v", err)
	}
	home := filepath.Join(dir, "home")
	env := append(os.Environ(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, ".config"), "KUBECONFIG=")
	port := freePort(b)
	data := filepath.Join(dir, "data")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()

	api := startAllot(b, dir, "apiserver-0", env, bin, "apiserver", "--data-dir", data, "--listen", "127.0.0.1:"+port)
	kc := filepath.Join(data, "kubeconfig")
	waitReady(b, kc, 2*time.Minute)
	cm := startAllot(b, dir, "controller-manager", env, bin, "controller-manager", "--kubeconfig", kc)
	defer stopProc(cm)
	c, err := client.NewForKubeconfig(kc)
	if err != nil {
		b.Fatal(err)
	}
	tmplName := "restart"
	tmpl := &resourceapi.ResourceClaimTemplate{ObjectMeta: metav1.ObjectMeta{Name: tmplName, Namespace: "default"},
		Spec: resourceapi.ResourceClaimTemplateSpec{Spec: resourceapi.ResourceClaimSpec{
			ResourceClassName: "restart.example.com", AllocationMode: resourceapi.AllocationModeWaitForFirstConsumer}}}
	if _, err := c.ResourceClaimTemplates("default").Create(ctx, tmpl); err != nil {
		b.Fatalf("create claim template: %v", err)
	}

	var fromReady, fromDelete []time.Duration
	b.ResetTimer()
	for round := range rounds {
		names := podNames(fmt.Sprintf("r%d-", round), 0, 10)
		for _, n := range names {
			p := claimPod(n)
			p.Spec.ResourceClaims[0].ResourceClaimTemplateName = &tmplName
			if _, err := c.Pods("default").Create(ctx, p); err != nil {
				b.Fatalf("create pod %s: %v", n, err)
			}
		}
		waitClaims(ctx, b, c, 10, 2*time.Minute)
		deleted := time.Now()
		for _, n := range names {
			if err := c.Pods("default").Delete(ctx, n, metav1.DeleteOptions{}); err != nil {
				b.Fatalf("delete pod %s: %v", n, err)
			}
		}
		stopProc(api)
		time.Sleep(down) // the outage being measured, not a wait for a condition
		api = startAllot(b, dir, "apiserver-"+strconv.Itoa(round+1), env, bin, "apiserver", "--data-dir", data, "--listen", "127.0.0.1:"+port)
		ready := waitReady(b, kc, 2*time.Minute)
		left := waitClaims(ctx, b, c, 0, 5*time.Minute)
		gone := time.Now()
		fromReady = append(fromReady, gone.Sub(ready))
		fromDelete = append(fromDelete, gone.Sub(deleted))
		b.Logf("round %d: claims collected %.1fs after the API server's return (%.1fs after the deletes; %d of 10 left at the return)",
			round, gone.Sub(ready).Seconds(), gone.Sub(deleted).Seconds(), left)
	}
	b.StopTimer()
	stopProc(api)
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		q := func(p float64) float64 { return ds[int(p*float64(len(ds)-1)+0.5)].Seconds() }
		b.Logf("%s over %d restarts (%s down): min %.1fs, median %.1fs, p90 %.1fs, max %.1fs",
			name, len(ds), down, q(0), q(0.5), q(0.9), q(1))
		b.ReportMetric(q(0.5), name+"-p50-s")
		b.ReportMetric(q(0.9), name+"-p90-s")
		b.ReportMetric(q(1), name+"-max-s")
	}
	report("return-to-collected", fromReady)
	report("delete-to-collected", fromDelete)
}

// waitClaims polls until the default namespace holds want claims, and
// returns how many it held at the first successful poll (the claims left
// when the API server came back, for want 0).
func waitClaims(ctx context.Context, b *testing.B, c *client.Client, want int, timeout time.Duration) int {
	b.Helper()
	deadline := time.Now().Add(timeout)
	first := -1
	for {
		list, err := c.ResourceClaims("default").List(ctx, metav1.ListOptions{})
		if err == nil {
			if first < 0 {
				first = len(list.Items)
			}
			if len(list.Items) == want {
				return first
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("want %d claims: not within %s (last error %v)", want, timeout, err)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// waitReady polls the API server of the kubeconfig kc until /readyz
// answers 200 and returns when it did.
func waitReady(b *testing.B, kc string, timeout time.Duration) time.Time {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if _, err := os.Stat(kc); err == nil {
			if c, err := client.NewForKubeconfig(kc); err == nil {
				res, err := c.RESTClient(corev1.SchemeGroupVersion).Get().AbsPath("/readyz").DoRaw(context.Background())
				if err == nil && len(res) > 0 {
					return time.Now()
				}
			}
		}
		if time.Now().After(deadline) {
			b.Fatalf("API server not ready within %s", timeout)
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// startAllot starts bin with args in its own process group, its output
// in dir/name.log.
func startAllot(b *testing.B, dir, name string, env []string, bin string, args ...string) *exec.Cmd {
	b.Helper()
	log, err := os.Create(filepath.Join(dir, name+".log"))
	if err != nil {
		b.Fatal(err)
	}
	cmd := exec.Command(bin, args...)
	cmd.Env = env
	cmd.Stdout, cmd.Stderr = log, log
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		b.Fatalf("start allot %v: %v", args, err)
	}
	b.Cleanup(func() { stopProc(cmd); log.Close() })
	return cmd
}

// stopProc kills cmd's process group (SIGKILL) and reaps it.
func stopProc(cmd *exec.Cmd) {
	if cmd.Process == nil || cmd.ProcessState != nil {
		return
	}
	_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
	_ = cmd.Wait()
}

func freePort(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return strconv.Itoa(ln.Addr().(*net.TCPAddr).Port)
}
