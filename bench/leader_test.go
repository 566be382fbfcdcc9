package bench

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/pkg/client"
)

// BenchmarkLeaderTakeover measures how long a standby scheduler takes to
// lead and schedule after the leader is killed with SIGKILL. It runs
// `allot apiserver` and two `allot scheduler --leader-elect` processes
// with the timers of ALLOT_BENCH_ELECTION (lease duration, renew deadline,
// retry period; default "1s,500ms,100ms", the smallest client-go accepts;
// "15s,10s,2s" are the flags' defaults). Each round kills the leader,
// creates a pod at once, and reports the time from the kill until the
// Lease names the standby and until the pod is bound; the killed replica
// is started again as the next round's standby. ALLOT_BENCH_ROUNDS rounds
// (default 1, a smoke run); bench/README.md has the numbers.
//
//	ALLOT_BENCH_ROUNDS=10 ALLOT_BENCH_ELECTION=15s,10s,2s go test ./bench/ -run '^$' -bench LeaderTakeover -benchtime 1x -timeout 30m -v
func BenchmarkLeaderTakeover(b *testing.B) {
	rounds := envInt("ALLOT_BENCH_ROUNDS", 1)
	timers := strings.Split(envOr("ALLOT_BENCH_ELECTION", "1s,500ms,100ms"), ",")
	if len(timers) != 3 {
		b.Fatalf("ALLOT_BENCH_ELECTION %q: want LEASE,RENEW,RETRY", timers)
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
	data := filepath.Join(dir, "data")
	ctx := context.Background()
	startAllot(b, dir, "apiserver", env, bin, "apiserver", "--data-dir", data, "--listen", "127.0.0.1:"+freePort(b))
	kc := filepath.Join(data, "kubeconfig")
	waitReady(b, kc, 2*time.Minute)
	c, err := client.NewForKubeconfig(kc)
	if err != nil {
		b.Fatal(err)
	}
	rc, err := clientcmd.BuildConfigFromFlags("", kc)
	if err != nil {
		b.Fatal(err)
	}
	cs := kubernetes.NewForConfigOrDie(rc)
	res := corev1.ResourceList{"cpu": resource.MustParse("64"), "memory": resource.MustParse("64Gi"), "pods": resource.MustParse("500")}
	node := &corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}
	if node, err = c.Nodes().Create(ctx, node); err != nil {
		b.Fatal(err)
	}
	node.Status = corev1.NodeStatus{Allocatable: res, Capacity: res, Conditions: []corev1.NodeCondition{{Type: corev1.NodeReady, Status: corev1.ConditionTrue}}}
	if _, err := c.Nodes().UpdateStatus(ctx, node); err != nil {
		b.Fatal(err)
	}
	procs := map[string]*exec.Cmd{}
	start := func(id string) {
		procs[id] = startAllot(b, dir, fmt.Sprintf("%s-%d", id, time.Now().UnixNano()), env, bin, "scheduler", "--kubeconfig", kc,
			"--leader-elect", "--leader-elect-identity", fmt.Sprintf("%s-%d", id, time.Now().UnixNano()),
			"--leader-elect-lease-duration", timers[0], "--leader-elect-renew-deadline", timers[1], "--leader-elect-retry-period", timers[2])
	}
	holder := func() string {
		l, err := cs.CoordinationV1().Leases("kube-system").Get(ctx, "allot-scheduler", metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}
	poll := func(what string, cond func() bool) {
		deadline := time.Now().Add(2 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				b.Fatalf("not within 2m: %s", what)
			}
			time.Sleep(5 * time.Millisecond)
		}
	}
	start("a")
	start("b")
	poll("a leader", func() bool { return holder() != "" })

	var toLease, toBound []time.Duration
	b.ResetTimer()
	for round := range rounds {
		leader := holder()
		id := leader[:1] // "a" or "b"
		killed := time.Now()
		stopProc(procs[id])
		name := fmt.Sprintf("takeover-%d", round)
		pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}}}
		if _, err := c.Pods("default").Create(ctx, pod); err != nil {
			b.Fatal(err)
		}
		var leased time.Time
		poll("the standby leads and binds "+name, func() bool {
			if leased.IsZero() {
				if h := holder(); h != "" && h != leader {
					leased = time.Now()
				}
			}
			p, err := c.Pods("default").Get(ctx, name)
			return err == nil && p.Spec.NodeName != ""
		})
		bound := time.Now()
		if leased.IsZero() {
			leased = bound
		}
		toLease, toBound = append(toLease, leased.Sub(killed)), append(toBound, bound.Sub(killed))
		b.Logf("round %d: %s killed; standby leads after %.2fs, pod bound after %.2fs", round, leader, leased.Sub(killed).Seconds(), bound.Sub(killed).Seconds())
		start(id) // the next round's standby
	}
	b.StopTimer()
	report := func(name string, ds []time.Duration) {
		slices.Sort(ds)
		q := func(p float64) float64 { return ds[int(p*float64(len(ds)-1)+0.5)].Seconds() }
		b.Logf("%s over %d kills (lease %s, renew %s, retry %s): min %.2fs, median %.2fs, max %.2fs",
			name, len(ds), timers[0], timers[1], timers[2], q(0), q(0.5), q(1))
		b.ReportMetric(q(0.5), name+"-p50-s")
		b.ReportMetric(q(1), name+"-max-s")
	}
	report("kill-to-leading", toLease)
	report("kill-to-bound", toBound)
	for _, p := range procs {
		_ = syscall.Kill(-p.Process.Pid, syscall.SIGKILL)
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
