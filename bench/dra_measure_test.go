package bench

import (
	"bufio"
	"context"
	"fmt"
	"net/http"
	"os"
	"runtime"
	"runtime/debug"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/cache"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/pkg/client"
)

// bindings records when each pod (namespace/name) is first seen bound,
// over one informer on bound pods of every namespace.
type bindings struct {
	mu      sync.Mutex
	times   map[string]time.Time
	changed chan struct{} // signalled (without blocking) after each record
}

func watchBindings(ctx context.Context, b *testing.B, c *client.Client) *bindings {
	b.Helper()
	w := &bindings{times: map[string]time.Time{}, changed: make(chan struct{}, 1)}
	inf := client.NewInformer(c.Pods("").WithoutManagedFields(), 0, nil, client.WithFieldSelector("spec.nodeName!="))
	// The harness needs a pod's key and node only: keeping whole pods (with
	// their managedFields) would add thousands of objects to the process's
	// heap that no allot component holds, and to the peak RSS measured.
	// For the same reason it asks for the pods without managedFields, as
	// allot's components do: decoding them is the harness's work, not
	// allot's, and it shares the process's two cores.
	if err := inf.SetTransform(bindingSkeleton); err != nil {
		b.Fatal(err)
	}
	record := func(obj any) {
		p, ok := obj.(*metav1.PartialObjectMetadata) // bindingSkeleton's: bound
		if !ok {
			return
		}
		now := time.Now()
		key := p.Namespace + "/" + p.Name
		w.mu.Lock()
		if _, seen := w.times[key]; !seen {
			w.times[key] = now
		}
		w.mu.Unlock()
		select {
		case w.changed <- struct{}{}:
		default:
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

// bindingSkeleton is what watchBindings keeps of a pod: its key and
// resource version (the informer's field selector passes bound pods only).
func bindingSkeleton(obj any) (any, error) {
	p, ok := obj.(*corev1.Pod)
	if !ok || p.Spec.NodeName == "" {
		return obj, nil
	}
	return &metav1.PartialObjectMetadata{
		ObjectMeta: metav1.ObjectMeta{Namespace: p.Namespace, Name: p.Name, UID: p.UID, ResourceVersion: p.ResourceVersion},
	}, nil
}

// wait returns the bind times of the pods ns/names once all are bound;
// after timeout it fails, naming a pod that is not bound and why.
func (w *bindings) wait(ctx context.Context, b *testing.B, c *client.Client, ns string, names []string, timeout time.Duration) []time.Time {
	b.Helper()
	deadline := time.NewTimer(timeout)
	defer deadline.Stop()
	out := make([]time.Time, len(names))
	i := 0 // names[:i] are bound; bindings are never forgotten
	for {
		w.mu.Lock()
		for ; i < len(names); i++ {
			t, ok := w.times[ns+"/"+names[i]]
			if !ok {
				break
			}
			out[i] = t
		}
		w.mu.Unlock()
		if i == len(names) {
			return out
		}
		select {
		case <-w.changed:
		case <-deadline.C:
			b.Fatalf("pod %s/%s not bound after %s: %s", ns, names[i], timeout, podState(ctx, c, ns, names[i]))
		}
	}
}

// podState describes why a pod is not bound, for failure messages.
func podState(ctx context.Context, c *client.Client, ns, name string) string {
	p, err := c.Pods(ns).Get(ctx, name)
	if err != nil {
		return err.Error()
	}
	for _, cond := range p.Status.Conditions {
		if cond.Type == corev1.PodScheduled {
			return fmt.Sprintf("PodScheduled=%s %s: %s", cond.Status, cond.Reason, cond.Message)
		}
	}
	return fmt.Sprintf("no PodScheduled condition (claims recorded: %d)", len(p.Status.ResourceClaimStatuses))
}

// createPods creates the named pods with clients goroutines; interval > 0
// spaces their creation at a steady arrival rate (pod i is due at
// start + i*interval). It returns each pod's creation start time.
func createPods(ctx context.Context, b *testing.B, c *client.Client, ns string, names []string, clients int, interval time.Duration) []time.Time {
	b.Helper()
	created := make([]time.Time, len(names))
	start := time.Now()
	runParallel(b, clients, len(names), func(i int) error {
		if d := time.Until(start.Add(time.Duration(i) * interval)); d > 0 {
			time.Sleep(d)
		}
		created[i] = time.Now()
		_, err := c.Pods(ns).Create(ctx, draPod(names[i]))
		return err
	})
	return created
}

// podNames is prefix-0 .. prefix-(n-1), starting at from.
func podNames(prefix string, from, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + "-" + strconv.Itoa(from+i)
	}
	return out
}

// measureCeiling is the API server's create rate for plain pods (no
// scheduler takes them) at the given concurrency, in namespace ns; round
// names the pods apart from other rounds'.
func measureCeiling(ctx context.Context, b *testing.B, c *client.Client, ns, round string, clients, n int) float64 {
	b.Helper()
	return runParallel(b, clients, n, func(i int) error {
		p := benchPod(fmt.Sprintf("ceiling-%s-%d", round, i))
		p.Spec.SchedulerName = "nobody"
		_, err := c.Pods(ns).Create(ctx, p)
		return err
	})
}

// deleteCeiling deletes the pods of one measureCeiling round at once
// (grace period 0).
func deleteCeiling(ctx context.Context, b *testing.B, c *client.Client, ns, round string, clients, n int) {
	b.Helper()
	zero := int64(0)
	runParallel(b, clients, n, func(i int) error {
		return c.Pods(ns).Delete(ctx, fmt.Sprintf("ceiling-%s-%d", round, i), metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
}

// settledWrites is writeCounts once the writes that follow the last
// binding have been made: the Scheduled events of the last pods, which
// event writers send after the binding, belong to the measured pods too.
// It waits until no write happened for 300ms (at most 10s).
func (e *env) settledWrites(b *testing.B) map[string]float64 {
	b.Helper()
	total := func(m map[string]float64) (n float64) {
		for _, v := range m {
			n += v
		}
		return n
	}
	cur := e.writeCounts(b)
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); {
		time.Sleep(300 * time.Millisecond)
		next := e.writeCounts(b)
		if total(next) == total(cur) {
			return next
		}
		cur = next
	}
	return cur
}

// writeCounts reads apiserver_request_total for the writing verbs, keyed
// "verb resource code".
func (e *env) writeCounts(b *testing.B) map[string]float64 {
	b.Helper()
	res, err := e.client.Get(e.srv.URL + "/metrics")
	if err != nil {
		b.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != http.StatusOK {
		b.Fatalf("metrics: %d", res.StatusCode)
	}
	out := map[string]float64{}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		labels, ok := strings.CutPrefix(line, "apiserver_request_total{")
		if !ok {
			continue
		}
		end := strings.LastIndexByte(labels, '}')
		if end < 0 {
			continue
		}
		l := map[string]string{}
		for _, kv := range strings.Split(labels[:end], ",") {
			k, v, _ := strings.Cut(kv, "=")
			l[k] = strings.Trim(v, `"`)
		}
		switch l["verb"] {
		case "create", "update", "patch", "delete", "deletecollection":
		default:
			continue
		}
		v, err := strconv.ParseFloat(strings.TrimSpace(labels[end+1:]), 64)
		if err != nil {
			b.Fatalf("metrics line %q: %v", line, err)
		}
		out[l["verb"]+" "+l["resource"]+" "+l["code"]] += v
	}
	if err := sc.Err(); err != nil {
		b.Fatal(err)
	}
	return out
}

// writeDelta is the writes between two writeCounts, in total and per
// key, divided by pods.
type writeDelta struct {
	perPod float64
	keys   []string
	byKey  map[string]float64
}

func diffWrites(before, after map[string]float64, pods int) writeDelta {
	d := writeDelta{byKey: map[string]float64{}}
	for k, v := range after {
		if n := v - before[k]; n > 0 {
			d.byKey[k] = n / float64(pods)
			d.perPod += n / float64(pods)
			d.keys = append(d.keys, k)
		}
	}
	slices.SortFunc(d.keys, func(a, b string) int {
		if d.byKey[a] != d.byKey[b] {
			if d.byKey[a] > d.byKey[b] {
				return -1
			}
			return 1
		}
		return strings.Compare(a, b)
	})
	return d
}

func (d writeDelta) String() string {
	parts := make([]string, len(d.keys))
	for i, k := range d.keys {
		parts[i] = fmt.Sprintf("%s %.2f", k, d.byKey[k])
	}
	return strings.Join(parts, ", ")
}

// cycleCounts are the scheduler's scheduling cycles by result: how many,
// and their total duration in seconds.
type cycleCounts map[string][2]float64

func schedulerCycles(b *testing.B, m *scheduler.Metrics) cycleCounts {
	b.Helper()
	fams, err := m.Registry.Gather()
	if err != nil {
		b.Fatal(err)
	}
	out := cycleCounts{}
	for _, f := range fams {
		if f.GetName() != "allot_scheduler_scheduling_attempt_duration_seconds" {
			continue
		}
		for _, mt := range f.GetMetric() {
			for _, l := range mt.GetLabel() {
				if l.GetName() == "result" {
					h := mt.GetHistogram()
					out[l.GetValue()] = [2]float64{float64(h.GetSampleCount()), h.GetSampleSum()}
				}
			}
		}
	}
	return out
}

// cycleDelta describes the cycles between two schedulerCycles per pod.
type cycleDelta struct {
	perPod float64
	text   string
}

func diffCycles(before, after cycleCounts, pods int) cycleDelta {
	var d cycleDelta
	var parts []string
	for _, r := range []string{scheduler.ResultScheduled, scheduler.ResultUnschedulable, scheduler.ResultError} {
		n, sec := after[r][0]-before[r][0], after[r][1]-before[r][1]
		if n <= 0 {
			continue
		}
		d.perPod += n / float64(pods)
		parts = append(parts, fmt.Sprintf("%s %.2f (%.1f ms each)", r, n/float64(pods), 1000*sec/n))
	}
	d.text = strings.Join(parts, ", ")
	return d
}

// resetPeakRSS returns freed memory to the OS and resets the process's
// peak resident set size (VmHWM), so that peakRSS reports the peak of
// what runs afterwards.
func resetPeakRSS(b *testing.B) {
	b.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	if err := os.WriteFile("/proc/self/clear_refs", []byte("5"), 0); err != nil {
		b.Logf("cannot reset peak RSS (%v); the peak includes earlier benchmarks", err)
	}
}

// peakRSS is VmHWM of /proc/self/status in MiB (0 where unavailable).
func peakRSS(b *testing.B) float64 {
	b.Helper()
	data, err := os.ReadFile("/proc/self/status")
	if err != nil {
		b.Logf("peak RSS unavailable: %v", err)
		return 0
	}
	for _, line := range strings.Split(string(data), "\n") {
		if v, ok := strings.CutPrefix(line, "VmHWM:"); ok {
			kb, err := strconv.ParseFloat(strings.TrimSpace(strings.TrimSuffix(strings.TrimSpace(v), "kB")), 64)
			if err == nil {
				return kb / 1024
			}
		}
	}
	return 0
}

// draResult is one measured phase.
type draResult struct {
	created, bound []time.Time // per measured pod
	// elapsed, when set, is the measured time (the steady state leaves
	// out the time between its measured batches); else the time from the
	// first create to the last bind.
	elapsed    time.Duration
	writes     writeDelta
	cycles     cycleDelta
	createRate float64 // API creates/s, same run, same concurrency
	clients    int
}

// report computes the metrics of r, reports them and logs a summary.
func (r draResult) report(b *testing.B) {
	b.Helper()
	first, last := r.created[0], r.bound[0]
	lat := make([]time.Duration, len(r.created))
	for i := range r.created {
		if r.created[i].Before(first) {
			first = r.created[i]
		}
		if r.bound[i].After(last) {
			last = r.bound[i]
		}
		lat[i] = r.bound[i].Sub(r.created[i])
	}
	span := last.Sub(first)
	if r.elapsed > 0 {
		span = r.elapsed
	}
	rate := float64(len(lat)) / span.Seconds()
	ceiling := r.createRate / r.writes.perPod
	p50, p99 := percentile(lat, 0.5), percentile(lat, 0.99)
	peak := peakRSS(b)
	b.ReportMetric(rate, "pods/s")
	b.ReportMetric(float64(p50.Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(r.writes.perPod, "writes/pod")
	b.ReportMetric(r.createRate, "api-creates/s")
	b.ReportMetric(ceiling, "ceiling-pods/s")
	b.ReportMetric(100*rate/ceiling, "%-of-ceiling")
	b.ReportMetric(peak, "peak-RSS-MiB")
	b.ReportMetric(r.cycles.perPod, "cycles/pod")
	b.Logf("%d pods: %.1f pods/s, p50 %s, p99 %s; %.2f API writes/pod; API creates %.0f/s at %d clients -> ceiling %.1f pods/s, reached %.0f%%; peak RSS (VmHWM) %.0f MiB",
		len(lat), rate, p50.Round(time.Millisecond), p99.Round(time.Millisecond), r.writes.perPod,
		r.createRate, r.clients, ceiling, 100*rate/ceiling, peak)
	b.Logf("writes per pod: %s", r.writes)
	b.Logf("scheduling cycles per pod: %s", r.cycles.text)
}

// waitClaimsReleased waits until no claim in ns is reserved or allocated
// any more, so that the claim controller's writes for deleted pods are
// counted where their pods are.
func waitClaimsReleased(ctx context.Context, b *testing.B, c *client.Client, ns string, timeout time.Duration) {
	b.Helper()
	deadline := time.Now().Add(timeout)
	for {
		list, err := c.ResourceClaims(ns).List(ctx, metav1.ListOptions{})
		if err != nil {
			b.Fatal(err)
		}
		busy := ""
		for _, cl := range list.Items {
			if cl.Status.Allocation != nil || len(cl.Status.ReservedFor) > 0 || len(cl.Finalizers) > 0 {
				busy = cl.Name
				break
			}
		}
		if busy == "" {
			return
		}
		if time.Now().After(deadline) {
			b.Fatalf("claim %s/%s still in use after %s", ns, busy, timeout)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkAllocations fails unless exactly want claims are allocated, each
// on its own instance.
func checkAllocations(ctx context.Context, b *testing.B, c *client.Client, want int) {
	b.Helper()
	list, err := c.ResourceClaims("").List(ctx, metav1.ListOptions{})
	if err != nil {
		b.Fatal(err)
	}
	owner := map[string]string{}
	for _, cl := range list.Items {
		if cl.Status.Allocation == nil {
			continue
		}
		for _, h := range cl.Status.Allocation.ResourceHandles {
			if h.StructuredData == nil || h.StructuredData.Partitionable == nil {
				continue
			}
			for _, inst := range h.StructuredData.Partitionable.Instances {
				id := h.StructuredData.NodeName + "/" + h.DriverName + "/" + inst.ID
				if prev, dup := owner[id]; dup {
					b.Fatalf("instance %s allocated to claims %s and %s/%s", id, prev, cl.Namespace, cl.Name)
				}
				owner[id] = cl.Namespace + "/" + cl.Name
			}
		}
	}
	if len(owner) != want {
		b.Fatalf("%d instances allocated, want %d", len(owner), want)
	}
}

// progress logs, every interval until ctx ends, where the pods are: bound
// so far, the scheduler's queues, its cycles, and the claim controller's
// queue. ALLOT_BENCH_PROGRESS=1 turns it on; it tells which stage holds a
// backlog.
func (cl *draCluster) progress(ctx context.Context, b *testing.B, w *bindings, interval time.Duration) {
	if os.Getenv("ALLOT_BENCH_PROGRESS") == "" {
		return
	}
	gauge := func(reg interface {
		Gather() ([]*dto.MetricFamily, error)
	}, name, label string) map[string]float64 {
		out := map[string]float64{}
		fams, err := reg.Gather()
		if err != nil {
			return out
		}
		for _, f := range fams {
			if f.GetName() != name {
				continue
			}
			for _, m := range f.GetMetric() {
				v := m.GetGauge().GetValue()
				if m.GetCounter() != nil {
					v = m.GetCounter().GetValue()
				}
				if h := m.GetHistogram(); h != nil {
					v = float64(h.GetSampleCount())
				}
				for _, l := range m.GetLabel() {
					if l.GetName() == label {
						out[l.GetValue()] += v
					}
				}
			}
		}
		return out
	}
	go func() {
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			w.mu.Lock()
			bound := len(w.times)
			w.mu.Unlock()
			q := gauge(cl.sched.Registry, "allot_scheduler_pending_pods", "queue")
			cycles := gauge(cl.sched.Registry, "allot_scheduler_scheduling_attempt_duration_seconds", "result")
			depth := gauge(cl.ctrl, "workqueue_depth", "name")
			b.Logf("progress: bound %d; scheduler active %.0f backoff %.0f unschedulable %.0f, cycles %v; claim controller queue %.0f",
				bound, q["active"], q["backoff"], q["unschedulable"], cycles, depth["resource_claim"])
		}
	}()
}
