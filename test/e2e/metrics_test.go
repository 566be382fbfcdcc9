package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"io"
	"net/http"
	"path/filepath"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	"github.com/prometheus/common/expfmt"
	"github.com/prometheus/common/model"
)

// TestMetricsAfterDemo runs `allot up --demo`, then scrapes every
// component's /metrics with the admin token: the API server's (which also
// serves the in-process scheduler and controller manager) and the local
// node agent's (on its log server). Every metric the issue names is there
// with a value the demo must have produced.
func TestMetricsAfterDemo(t *testing.T) {
	t.Parallel()
	requireRoot(t)
	c := newCluster(t)
	c.start(t, "--demo", "--disable", "", "--demo-timeout", "3m",
		"--pod-resources-socket", filepath.Join(c.dataDir, "pod-resources.sock"),
		"--admit-retry-interval", "200ms", "--relist-interval", "200ms")
	t.Cleanup(func() {
		if _, stderr, err := c.runKubectl("delete", "pod", "demo", "-n", "demo", "--wait=true", "--timeout=90s"); err != nil {
			t.Logf("delete the demo pod: %v: %s", err, stderr)
		}
	})
	line, _, err := c.p.Stdout.WaitFor(0, 4*time.Minute, func(s string) bool { return strings.HasPrefix(s, "demo: pod demo/demo ") })
	if err != nil {
		t.Fatalf("no demo outcome: %v\nstdout:\n%s", err, c.p.Stdout)
	}
	if line != "demo: pod demo/demo Succeeded" {
		t.Fatalf("demo ended with %q\nstdout:\n%s", line, c.p.Stdout)
	}

	// The API server: its own metrics, the scheduler's and the controller
	// manager's. Counters the demo bumped are checked with a floor; gauges
	// and families that may legitimately be zero only for presence.
	api := scrapeAPI(t, c)
	for _, want := range []metricCheck{
		{name: "apiserver_request_total", min: 1},
		{name: "apiserver_request_duration_seconds", min: 1},
		{name: "allot_scheduler_schedule_attempts_total", labels: "result=scheduled", min: 1},
		{name: "allot_scheduler_scheduling_attempt_duration_seconds", labels: "result=scheduled", min: 1},
		{name: "allot_scheduler_pod_scheduling_duration_seconds", min: 1},
		{name: "allot_scheduler_pending_pods", labels: "queue=unschedulable"},
		{name: "allot_scheduler_pending_pods_by_reason", labels: "reason=Unschedulable"},
		{name: "allot_scheduler_dra_structured_classes", min: 1},
		{name: "allot_scheduler_dra_claim_parameter_types", labels: "resolved=true", min: 1},
		{name: "allot_scheduler_dra_claim_parameter_types", labels: "resolved=false", zero: true},
		{name: "allot_scheduler_dra_structured_claims_allocated"},
		{name: "allot_scheduler_dra_claims_allocated_total", min: 1},
		{name: "resource_controller_create_total", min: 2},
		{name: "resource_controller_create_failures_total"},
		{name: "workqueue_depth", labels: "name=resource_claim"},
		{name: "workqueue_adds_total", labels: "name=resource_claim", min: 1},
		{name: "workqueue_queue_duration_seconds", labels: "name=resource_claim", min: 1},
		{name: "workqueue_work_duration_seconds", labels: "name=resource_claim", min: 1},
		{name: "workqueue_retries_total", labels: "name=resource_claim"},
		{name: "workqueue_depth", labels: "name=gc_check"},
		{name: "workqueue_depth", labels: "name=namespace"},
	} {
		want.check(t, "API server", api)
	}

	// The node agent: device plugins, DRA drivers (the structured
	// gpu.example.com and the control-plane fabric.example.com each
	// prepared the demo's claim) and pods.
	node := scrapeNode(t, c)
	for _, want := range []metricCheck{
		{name: "device_plugin_registration_total", min: 1},
		{name: "device_plugin_alloc_duration_seconds", min: 1},
		{name: "dra_operations_duration_seconds", labels: "operation=prepare", min: 2},
		{name: "dra_operations_duration_seconds", labels: "driver=gpu.example.com,operation=prepare", min: 1},
		{name: "dra_operations_duration_seconds", labels: "driver=fabric.example.com,operation=prepare", min: 1},
		{name: "dra_registered_drivers", min: 2},
		{name: "allot_node_container_starts_total", min: 2},
		{name: "allot_node_pod_start_duration_seconds", min: 1},
	} {
		want.check(t, "node", node)
	}
}

// metricCheck is one expectation on a scraped family: the series whose
// labels include labels ("k=v,k=v") must exist, and their sum (for a
// histogram, the observation count) must be at least min, or exactly 0
// when zero is set.
type metricCheck struct {
	name   string
	labels string
	min    float64
	zero   bool
}

func (m metricCheck) check(t *testing.T, where string, families map[string]*dto.MetricFamily) {
	t.Helper()
	what := m.name
	if m.labels != "" {
		what += "{" + m.labels + "}"
	}
	f, ok := families[m.name]
	if !ok {
		t.Errorf("%s /metrics lacks %s", where, m.name)
		return
	}
	var sum float64
	matched := 0
	for _, s := range f.GetMetric() {
		if !hasLabels(s, m.labels) {
			continue
		}
		matched++
		sum += s.GetCounter().GetValue() + s.GetGauge().GetValue() + float64(s.GetHistogram().GetSampleCount())
	}
	switch {
	case matched == 0:
		t.Errorf("%s /metrics has %s but no series %s", where, m.name, what)
	case sum < m.min:
		t.Errorf("%s /metrics: %s = %v, want at least %v", where, what, sum, m.min)
	case m.zero && sum != 0:
		t.Errorf("%s /metrics: %s = %v, want 0", where, what, sum)
	}
}

func hasLabels(s *dto.Metric, want string) bool {
	if want == "" {
		return true
	}
	have := map[string]string{}
	for _, l := range s.GetLabel() {
		have[l.GetName()] = l.GetValue()
	}
	for _, kv := range strings.Split(want, ",") {
		k, v, _ := strings.Cut(kv, "=")
		if have[k] != v {
			return false
		}
	}
	return true
}

// scrapeAPI reads the API server's /metrics with the admin kubeconfig.
func scrapeAPI(t *testing.T, c *cluster) map[string]*dto.MetricFamily {
	t.Helper()
	return parseMetrics(t, "API server", c.kubectl(t, "get", "--raw", "/metrics"))
}

// scrapeNode reads the local node agent's /metrics over TLS (its serving
// certificate is the cluster CA's), at the address and port its Node
// publishes, with the admin token.
func scrapeNode(t *testing.T, c *cluster) map[string]*dto.MetricFamily {
	t.Helper()
	addr := c.kubectl(t, "get", "nodes", "-o",
		`jsonpath={.items[0].status.addresses[?(@.type=="InternalIP")].address}:{.items[0].status.daemonEndpoints.kubeletEndpoint.Port}`)
	token := c.kubectl(t, "config", "view", "--raw", "--minify", "-o", "jsonpath={.users[0].user.token}")
	caB64 := c.kubectl(t, "config", "view", "--raw", "--minify", "-o", "jsonpath={.clusters[0].cluster.certificate-authority-data}")
	caPEM, err := base64.StdEncoding.DecodeString(strings.TrimSpace(caB64))
	if err != nil {
		t.Fatalf("kubeconfig CA: %v", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(caPEM) {
		t.Fatal("kubeconfig CA: no certificate")
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots}}}
	ctx, cancel := context.WithTimeout(context.Background(), commandTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", "https://"+strings.TrimSpace(addr)+"/metrics", nil)
	if err != nil {
		t.Fatalf("node metrics request: %v", err)
	}
	req.Header.Set("Authorization", "Bearer "+strings.TrimSpace(token))
	res, err := hc.Do(req)
	if err != nil {
		t.Fatalf("GET node /metrics: %v", err)
	}
	defer res.Body.Close()
	body, err := io.ReadAll(res.Body)
	if err != nil {
		t.Fatalf("read node /metrics: %v", err)
	}
	if res.StatusCode != http.StatusOK {
		t.Fatalf("GET node /metrics at %s: %s: %s", addr, res.Status, body)
	}
	return parseMetrics(t, "node", string(body))
}

func parseMetrics(t *testing.T, where, text string) map[string]*dto.MetricFamily {
	t.Helper()
	p := expfmt.NewTextParser(model.UTF8Validation)
	families, err := p.TextToMetricFamilies(strings.NewReader(text))
	if err != nil {
		t.Fatalf("parse %s /metrics: %v\n%s", where, err, text)
	}
	return families
}
