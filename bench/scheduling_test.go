package bench

import (
	"bufio"
	"context"
	"fmt"
	"net"
	"net/http"
	"os"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node"
	"allot.dev/allot/internal/node/pods"
	"allot.dev/allot/internal/node/runtime/fake"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/pkg/client"
)

// BenchmarkSchedulingBasic is kube-scheduler's SchedulingBasic shape: plain
// pods on simulated nodes, created at a steady rate while the scheduler
// runs, through the API server and etcd. Node status writes are off (as in
// kube-scheduler's benchmark, which has no kubelet) and then on. It reports
// pods/s from first create to last bind, create-to-bound latency, API
// writes per pod, and the ceiling: API creates/s measured in the same run
// at the same concurrency divided by writes per pod.
func BenchmarkSchedulingBasic(b *testing.B) {
	for _, statusWrites := range []bool{false, true} {
		b.Run(fmt.Sprintf("nodeStatusWrites=%v", statusWrites), func(b *testing.B) {
			for i := 0; i < b.N; i++ {
				runSchedulingBasic(b, envInt("ALLOT_BENCH_NODES", 500), envInt("ALLOT_BENCH_PODS", 5000), statusWrites)
			}
		})
	}
}

func envInt(name string, def int) int {
	if v, err := strconv.Atoi(os.Getenv(name)); err == nil && v > 0 {
		return v
	}
	return def
}

const benchClients = 16

func runSchedulingBasic(b *testing.B, nodes, pods int, statusWrites bool) {
	e := newEnv(b)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// The load generator, the simulated nodes and the scheduler each get
	// their own connection, as separate processes would.
	c, fleetC, schedC := e.newClient(b), e.newClient(b), e.newClient(b)
	startFleet(ctx, b, fleetC, nodes, statusWrites)
	go func() {
		_ = scheduler.Run(ctx, scheduler.Config{Client: schedC, Logger: quietLogger()})
	}()

	// The ceiling: API creates at the same concurrency, same run, measured
	// before and after the scheduled pods (the mean of both: the speed of
	// this shared machine drifts by a third within minutes).
	ceilingN := max(pods/4, 100)
	ceilingRound := 0
	measure := func() float64 {
		ceilingRound++
		round := ceilingRound
		return runParallel(b, benchClients, ceilingN, func(i int) error {
			p := benchPod(fmt.Sprintf("ceiling-%d-%d", round, i))
			p.Spec.SchedulerName = "nobody"
			_, err := c.Pods("default").Create(ctx, p)
			return err
		})
	}
	rateBefore := measure()

	bound := watchBound(ctx, b, c, pods)
	writes0 := e.apiWrites(b)
	created := make([]time.Time, pods)
	interval := time.Second / time.Duration(envInt("ALLOT_BENCH_RATE", 1000))
	start := time.Now()
	runParallel(b, benchClients, pods, func(i int) error {
		// A steady arrival rate: pod i is due at start + i*interval.
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		created[i] = time.Now()
		_, err := c.Pods("default").Create(ctx, benchPod(fmt.Sprintf("pod-%d", i)))
		return err
	})
	times := bound.wait(b, 5*time.Minute)
	writes := float64(e.apiWrites(b)-writes0) / float64(pods)
	rateAfter := measure()
	createRate := (rateBefore + rateAfter) / 2
	b.Logf("API creates at %d clients: %.0f/s before the run, %.0f/s after", benchClients, rateBefore, rateAfter)

	var lat []time.Duration
	last := start
	for i := 0; i < pods; i++ {
		t := times[fmt.Sprintf("pod-%d", i)]
		lat = append(lat, t.Sub(created[i]))
		if t.After(last) {
			last = t
		}
	}
	rate := float64(pods) / last.Sub(start).Seconds()
	ceiling := createRate / writes
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	b.ReportMetric(rate, "pods/s")
	b.ReportMetric(float64(percentile(lat, 0.5).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(percentile(lat, 0.99).Microseconds())/1000, "p99-ms")
	b.ReportMetric(writes, "writes/pod")
	b.ReportMetric(createRate, "api-creates/s")
	b.ReportMetric(rate/ceiling, "of-ceiling")
	b.ReportMetric(float64(ms.Sys)/(1<<20), "process-MiB")
}

func benchPod(name string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{
			Name: "c", Image: "busybox",
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("100Mi"),
			}},
		}}},
	}
}

// startFleet registers simulated nodes with the fake runtime and waits
// until they are Ready.
func startFleet(ctx context.Context, b *testing.B, c *client.Client, n int, statusWrites bool) {
	cfgs := make([]node.Config, n)
	// Without status writes the simulated nodes stand in for Kubernetes'
	// benchmark, which has no kubelets: nothing they find by relisting or
	// resyncing their pods is reported, so those timers are slowed down to
	// keep their work (500 relists and 500 pod syncs a second at the
	// defaults, 6 % of all CPU in BenchmarkDRA's 5000pods) out of the
	// measurement. With status writes they keep the defaults.
	relist, timing := time.Duration(0), pods.Timing{}
	if !statusWrites {
		relist, timing.Resync = time.Minute, 10*time.Minute
	}
	for i := range cfgs {
		rt, err := fake.New(fake.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cfgs[i] = node.Config{NodeName: fmt.Sprintf("sim-%03d", i), Client: c, Runtime: rt,
			Capacity:          corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("32"), corev1.ResourceMemory: resource.MustParse("128Gi")},
			HeartbeatInterval: time.Hour, RelistInterval: relist, Pods: timing,
			DisableStatusUpdates: !statusWrites, DisableEvents: true,
			Logger: quietLogger()}
	}
	fleet, err := node.NewFleet(c, cfgs)
	if err != nil {
		b.Fatal(err)
	}
	go func() { _ = fleet.Run(ctx) }()
	deadline := time.Now().Add(2 * time.Minute)
	for {
		list, err := c.Nodes().List(ctx, metav1.ListOptions{})
		if err == nil && len(list.Items) == n {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("simulated nodes did not register")
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// boundWatch records when each pod is first seen with a node.
type boundWatch struct {
	mu    sync.Mutex
	times map[string]time.Time
	want  int
	done  chan struct{}
}

func watchBound(ctx context.Context, b *testing.B, c *client.Client, want int) *boundWatch {
	w := &boundWatch{times: map[string]time.Time{}, want: want, done: make(chan struct{})}
	// Only bound pods: each pod reaches this watcher once, when bound.
	inf := client.NewInformer(c.Pods("default"), 0, nil, client.WithFieldSelector("spec.nodeName!="))
	record := func(obj any) {
		p, ok := obj.(*corev1.Pod)
		if !ok || p.Spec.NodeName == "" || !strings.HasPrefix(p.Name, "pod-") {
			return
		}
		now := time.Now()
		w.mu.Lock()
		defer w.mu.Unlock()
		if _, seen := w.times[p.Name]; !seen {
			w.times[p.Name] = now
			if len(w.times) == w.want {
				close(w.done)
			}
		}
	}
	if _, err := inf.AddEventHandler(cache.ResourceEventHandlerFuncs{
		AddFunc: record, UpdateFunc: func(_, o any) { record(o) },
	}); err != nil {
		b.Fatal(err)
	}
	go inf.Run(ctx.Done())
	if !cache.WaitForCacheSync(ctx.Done(), inf.HasSynced) {
		b.Fatal("pod informer did not sync")
	}
	return w
}

func (w *boundWatch) wait(b *testing.B, timeout time.Duration) map[string]time.Time {
	select {
	case <-w.done:
	case <-time.After(timeout):
		w.mu.Lock()
		defer w.mu.Unlock()
		b.Fatalf("only %d of %d pods bound", len(w.times), w.want)
	}
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.times
}

// apiWrites sums apiserver_request_total over the writing verbs.
func (e *env) apiWrites(b *testing.B) int64 {
	res, err := e.client.Get(e.srv.URL + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("metrics: %d", res.StatusCode)
	}
	var total int64
	sc := bufio.NewScanner(res.Body)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		for _, v := range []string{`verb="create"`, `verb="update"`, `verb="patch"`, `verb="delete"`} {
			if strings.Contains(line, v) {
				f, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
				if err == nil {
					total += int64(f)
				}
			}
		}
	}
	return total
}

// newClient connects to the test server over a connection of its own (a
// custom dialer keeps client-go from sharing one cached transport).
func (e *env) newClient(b *testing.B) *client.Client {
	c, err := client.NewForConfig(&rest.Config{Host: e.srv.URL, QPS: 100000, Burst: 100000,
		TLSClientConfig: rest.TLSClientConfig{Insecure: true}, Dial: (&net.Dialer{}).DialContext})
	if err != nil {
		b.Fatal(err)
	}
	return c
}
