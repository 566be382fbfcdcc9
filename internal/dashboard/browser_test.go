package dashboard_test

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourceapi "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/internal/scheduler/schedtest"
)

var updateScreenshot = flag.Bool("update-screenshot", false,
	"copy the browser test's screenshot to docs/images/dashboard.png")

// chromium is Debian's browser, which hack/setup.sh installs. The tests
// never download a browser of their own.
const chromium = "/usr/bin/chromium"

// browser is a headless Chromium tab, its console errors recorded.
type browser struct {
	ctx context.Context

	mu     sync.Mutex
	errors []string
}

// newBrowser starts Chromium with a fresh profile, or skips the test when
// Chromium is missing outside CI (with CI set, it must run).
func newBrowser(t *testing.T) *browser {
	t.Helper()
	if _, err := os.Stat(chromium); err != nil {
		if os.Getenv("CI") == "" {
			t.Skipf("%s is not installed (hack/setup.sh installs it; with CI set this test must run)", chromium)
		}
		t.Fatalf("CI is set and the browser test needs %s: %v", chromium, err)
	}
	out, err := os.Create(filepath.Join(t.ArtifactDir(), "chromium.log"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { out.Close() })
	opts := append(chromedp.DefaultExecAllocatorOptions[:],
		chromedp.ExecPath(chromium),
		chromedp.UserDataDir(t.TempDir()),
		chromedp.NoSandbox, // tests run as root
		chromedp.DisableGPU,
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("ignore-certificate-errors", true), // the cluster's self-signed CA
		chromedp.WindowSize(1280, 1000),
		chromedp.CombinedOutput(out),
	)
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	b := &browser{ctx: ctx}
	// Start the browser, then subscribe to the console before any page
	// loads.
	if err := chromedp.Do(ctx); err != nil {
		t.Fatalf("start %s: %v", chromium, err)
	}
	messages := chromedp.Console(ctx)
	go func() {
		for m, err := range messages {
			if err != nil {
				return
			}
			if m.Type == chromedp.ConsoleError || m.IsException() {
				b.mu.Lock()
				b.errors = append(b.errors, m.String())
				b.mu.Unlock()
			}
		}
	}()
	return b
}

// do runs steps, each within a minute.
func (b *browser) do(t *testing.T, what string, steps ...chromedp.Action[chromedp.Void]) {
	t.Helper()
	for _, s := range steps {
		ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
		err := chromedp.Do(ctx, s)
		cancel()
		if err != nil {
			t.Fatalf("%s: %v\n--- the page reads:\n%s", what, err, b.pageText())
		}
	}
}

// pageText is the page's text, for failure messages.
func (b *browser) pageText() string {
	ctx, cancel := context.WithTimeout(b.ctx, 10*time.Second)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Evaluate[string]("document.body.innerText"))
	if err != nil {
		return fmt.Sprintf("(read the page: %v)", err)
	}
	return s
}

// text is the visible text of the first element sel matches.
func (b *browser) text(t *testing.T, sel string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
	if err != nil {
		t.Fatalf("read text of %s: %v", sel, err)
	}
	return s
}

// eval evaluates a JavaScript expression in the page.
func eval[T any](t *testing.T, b *browser, expr string) T {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr))
	if err != nil {
		t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// waitFor waits until an element matches sel.
func (b *browser) waitFor(t *testing.T, sel string) {
	t.Helper()
	b.do(t, "wait for "+sel, chromedp.WaitVisible(chromedp.CSS(sel)))
}

func (b *browser) noConsoleErrors(t *testing.T) {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, e := range b.errors {
		t.Errorf("browser console: %s", e)
	}
}

// The dashboard, opened from the URL `allot up` printed, draws every node
// and device with its state and holders, explains the pending pod, and
// follows changes live: a new node appears, and a held instance turns free
// once its pod is deleted and the claim controller releases the claim.
func TestDashboardInBrowser(t *testing.T) {
	b := newBrowser(t)
	fx := setupDevices(t)

	b.do(t, "open the dashboard", chromedp.Navigate(up.Dashboard))
	for _, n := range []string{"dash-gpu", "dash-cpu"} {
		b.waitFor(t, fmt.Sprintf(`[data-node=%q]`, n))
	}
	if loc := eval[string](t, b, "location.href"); strings.Contains(loc, "token") {
		t.Errorf("the token stays in the address bar: %s", loc)
	}
	gpu := `[data-node="dash-gpu"] `
	for _, dev := range []string{"gpu-0", "gpu-1", "gpu-2", "gpu-3"} {
		b.waitFor(t, gpu+fmt.Sprintf(`[data-driver=%q] [data-instance=%q]`, driver, dev))
	}

	held := gpu + fmt.Sprintf(`[data-instance=%q]`, fx.wholeID)
	b.waitFor(t, held+`[data-state="held"]`)
	if s := b.text(t, held); !strings.Contains(s, "claim dash/c-whole") || !strings.Contains(s, "pod dash/p-whole") {
		t.Errorf("held instance %s reads %q, want its claim and pod", fx.wholeID, s)
	}
	b.waitFor(t, gpu+`[data-instance="gpu-1"][data-state="partitioned"]`)
	b.waitFor(t, gpu+fmt.Sprintf(`[data-instance=%q][data-state="held"]`, fx.quarterID))
	b.waitFor(t, gpu+`[data-instance="gpu-1/halves/h0"][data-state="unavailable"]`)
	b.waitFor(t, gpu+`[data-instance="gpu-2"][data-state="unhealthy"]`)
	b.waitFor(t, gpu+`[data-instance="gpu-1/quarters/q3"][data-state="free"]`)
	b.waitFor(t, gpu+`tr[data-resource="example.com/fpga"] td[data-used="1"]`)

	pending := `[data-pod="dash/p-pending"][data-explained="true"]`
	b.waitFor(t, pending)
	if s := b.text(t, pending); !strings.Contains(s, "Insufficient example.com/fpga") || !strings.Contains(s, "NodeResourcesFit") {
		t.Errorf("pending pod reads %q, want the scheduler's reasons", s)
	}
	b.waitFor(t, `#conn[data-state="live"]`)
	saveScreenshot(t, b)

	createNode(t, schedtest.MakeNode("dash-late").Alloc("cpu", "4").Obj())
	b.waitFor(t, `[data-node="dash-late"]`)

	zero := int64(0)
	must(t, "delete pod p-whole", func() error {
		return up.Admin.Pods("dash").Delete(callCtx(t), "p-whole", metav1.DeleteOptions{GracePeriodSeconds: &zero})
	})
	b.waitFor(t, held+`[data-state="free"]`)
	if s := b.text(t, held); strings.Contains(s, "c-whole") {
		t.Errorf("freed instance still names its claim: %q", s)
	}
	b.noConsoleErrors(t)
}

// Without a token in the URL the page asks for one; a wrong token is
// refused with the API server's 401, a right one logs in, and logging
// out forgets it.
func TestDashboardLogin(t *testing.T) {
	b := newBrowser(t)
	b.do(t, "open the dashboard", chromedp.Navigate(up.URL+"/dashboard/"))
	b.waitFor(t, "#login")
	submit := chromedp.Click(chromedp.CSS(`#login-form button[type="submit"]`))
	b.do(t, "log in with a wrong token", chromedp.SendKeys(chromedp.CSS("#token-input"), "not-a-token"), submit)
	b.waitFor(t, "#login")
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	_, err := chromedp.Run(ctx, chromedp.Poll[bool](`document.getElementById('login-error').textContent.includes('401')`))
	cancel()
	if err != nil {
		t.Fatalf("wait for the 401 message: %v (login error reads %q)", err, b.text(t, "#login-error"))
	}
	b.do(t, "log in", chromedp.SendKeys(chromedp.CSS("#token-input"), up.AdminToken), submit)
	b.waitFor(t, `#conn[data-state="live"]`)
	b.waitFor(t, "#nodes")
	b.do(t, "log out", chromedp.Click(chromedp.CSS("#logout")))
	b.waitFor(t, "#login")
	if tok := eval[string](t, b, `sessionStorage.getItem('allot.dashboard.token') || ''`); tok != "" {
		t.Errorf("the token outlives logging out")
	}
}

// saveScreenshot writes the page as PNG into the test's artifact
// directory (kept with `go test -artifacts`), and with -update-screenshot
// into docs/images for the operator guide.
func saveScreenshot(t *testing.T, b *browser) {
	t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, time.Minute)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	path := filepath.Join(t.ArtifactDir(), "dashboard.png")
	if err := os.WriteFile(path, png, 0o644); err != nil {
		t.Fatal(err)
	}
	t.Logf("screenshot: %s", path)
	if *updateScreenshot {
		if err := os.WriteFile(filepath.Join("..", "..", "docs", "images", "dashboard.png"), png, 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

const driver = "gpu.example.com"

// devices are the IDs the scheduler allocated in setupDevices.
type devices struct {
	wholeID, quarterID string
}

// setupDevices creates, in namespace dash: node dash-gpu with four GPUs
// (gpu-1 partitionable in halves or quarters, gpu-2 unhealthy) and two
// device-plugin FPGAs, node dash-cpu without devices, a pod holding a
// whole GPU, one holding a quarter of gpu-1, one using an FPGA, and one
// asking for more FPGAs than exist. The scheduler of `allot up`
// allocates and binds.
func setupDevices(t *testing.T) devices {
	t.Helper()
	createNamespace(t, "dash")
	createNode(t, schedtest.MakeNode("dash-gpu").Alloc("cpu", "16").Alloc("example.com/fpga", "2").Obj())
	createNode(t, schedtest.MakeNode("dash-cpu").Alloc("cpu", "8").Obj())
	ctx := callCtx(t)
	mem := func(q string) []resourceapi.Attribute {
		v := resource.MustParse(q)
		return []resourceapi.Attribute{{Name: "memory", AttributeValue: resourceapi.AttributeValue{Quantity: &v}}}
	}
	parts := func(prefix string, n int, q string) []resourceapi.ResourceInstance {
		var out []resourceapi.ResourceInstance
		for i := range n {
			out = append(out, resourceapi.ResourceInstance{Name: fmt.Sprintf("%s%d", prefix, i), Attributes: mem(q)})
		}
		return out
	}
	slice := &resourceapi.NodeResourceSlice{ObjectMeta: metav1.ObjectMeta{Name: "dash-gpu-gpus"}}
	slice.Spec.NodeName, slice.Spec.DriverName = "dash-gpu", driver
	slice.Spec.Partitionable = &resourceapi.PartitionableResources{ResourceInstances: []resourceapi.ResourceInstance{
		{Name: "gpu-0", Attributes: mem("80Gi")},
		{Name: "gpu-1", Attributes: mem("80Gi"), Partitions: []resourceapi.ResourceInstanceGroup{
			{Name: "halves", ResourceInstances: parts("h", 2, "40Gi")},
			{Name: "quarters", ResourceInstances: parts("q", 4, "20Gi")},
		}},
		{Name: "gpu-2", Attributes: mem("80Gi"), Health: resourceapi.InstanceUnhealthy},
		{Name: "gpu-3", Attributes: mem("80Gi")},
	}}
	must(t, "create slice", func() error { _, err := up.Admin.NodeResourceSlices().Create(ctx, slice); return err })
	class := &resourceapi.ResourceClass{ObjectMeta: metav1.ObjectMeta{Name: "dash-gpu"}, DriverName: driver}
	must(t, "create class", func() error { _, err := up.Admin.ResourceClasses().Create(ctx, class); return err })
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = up.Admin.NodeResourceSlices().Delete(ctx, slice.Name, metav1.DeleteOptions{})
		_ = up.Admin.ResourceClasses().Delete(ctx, class.Name, metav1.DeleteOptions{})
	})
	for name, selector := range map[string]string{"whole": `quantities["memory"] >= "80Gi"`, "quarter": `quantities["memory"] <= "20Gi"`} {
		params := &resourceapi.ResourceClaimParameters{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "dash"},
			Requests: []resourceapi.ResourceRequest{{DriverName: driver, ResourceRequestModel: resourceapi.ResourceRequestModel{
				Partitionable: &resourceapi.PartitionableResourceRequests{Required: []resourceapi.PartitionableResourceRequest{
					{Name: "gpu", Selector: selector}}},
			}}}}
		must(t, "create parameters "+name, func() error { _, err := up.Admin.ResourceClaimParameters("dash").Create(ctx, params); return err })
		claim := &resourceapi.ResourceClaim{ObjectMeta: metav1.ObjectMeta{Name: "c-" + name, Namespace: "dash"}, Spec: resourceapi.ResourceClaimSpec{
			ResourceClassName: class.Name,
			ParametersRef:     &resourceapi.ResourceClaimParametersReference{APIGroup: resourceapi.GroupName, Kind: "ResourceClaimParameters", Name: name},
		}}
		must(t, "create claim c-"+name, func() error { _, err := up.Admin.ResourceClaims("dash").Create(ctx, claim); return err })
		claimName := claim.Name
		pod := schedtest.MakePod("p-" + name)
		pod.Obj().Spec.ResourceClaims = []corev1.PodResourceClaim{{Name: "gpu", ResourceClaimName: &claimName}}
		createPod(t, pod, "dash")
	}
	createPod(t, schedtest.MakePod("p-fpga").Req("example.com/fpga", "1").Limit("example.com/fpga", "1"), "dash")
	createPod(t, schedtest.MakePod("p-pending").Req("example.com/fpga", "4").Limit("example.com/fpga", "4"), "dash")
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		zero := int64(0)
		for _, p := range []string{"p-whole", "p-quarter", "p-fpga", "p-pending"} {
			_ = up.Admin.Pods("dash").Delete(ctx, p, metav1.DeleteOptions{GracePeriodSeconds: &zero})
		}
	})
	var fx devices
	eventually(t, "both claims allocated and their pods bound", func() bool {
		fx.wholeID, fx.quarterID = allocatedID(t, "c-whole"), allocatedID(t, "c-quarter")
		for _, p := range []string{"p-whole", "p-quarter", "p-fpga"} {
			if pod, err := up.Admin.Pods("dash").Get(callCtx(t), p); err != nil || pod.Spec.NodeName != "dash-gpu" {
				return false
			}
		}
		return fx.wholeID != "" && fx.quarterID != ""
	})
	return fx
}

// allocatedID is the instance allocated to a claim of namespace dash, or
// "" while it is not allocated.
func allocatedID(t *testing.T, claim string) string {
	c, err := up.Admin.ResourceClaims("dash").Get(callCtx(t), claim)
	if err != nil || c.Status.Allocation == nil || len(c.Status.Allocation.ResourceHandles) == 0 {
		return ""
	}
	sd := c.Status.Allocation.ResourceHandles[0].StructuredData
	if sd == nil || sd.Partitionable == nil || len(sd.Partitionable.Instances) == 0 {
		return ""
	}
	return sd.Partitionable.Instances[0].ID
}
