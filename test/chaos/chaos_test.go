package chaos

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"allot.dev/allot/test/internal/testproc"
)

// The defaults are CI's short run (about two minutes, fixed seed); `make
// chaos` runs a long one with its own values.
var (
	flagDuration = flag.Duration("chaos.duration", 60*time.Second, "how long pods are created and components killed")
	flagRate     = flag.Float64("chaos.rate", 3, "pods created per second")
	flagKill     = flag.Duration("chaos.kill-interval", 3*time.Second, "mean time between kills")
	flagSeed     = flag.Uint64("chaos.seed", 1, "seed of the run's random choices")
	flagNodes    = flag.Int("chaos.nodes", 3, "DRA nodes (node agent and gpu.example.com driver, each a process)")
	flagUpstream = flag.Int("chaos.upstream-nodes", 1, "DRA nodes whose driver is test/upstreamdriver (upstream.example.com, on the upstream kubeletplugin library)")
	flagSimNodes = flag.Int("chaos.sim-nodes", 2, "simulated nodes without devices")
	flagReplicas = flag.Int("chaos.replicas", 2, "replicas of the scheduler and the controller manager (leader election above one)")
	flagSettle   = flag.Duration("chaos.settle", 90*time.Second, "after the churn: how long the cluster may go without a pod finishing, and how long deleted pods and their claims may take to go (longer than client-go's relist backoff, up to a minute with jitter after repeated failures)")
	flagFence    = flag.Duration("chaos.self-fence-after", 2*time.Second, "the node agents' --self-fence-after")
	flagOutage   = flag.Duration("chaos.outage", 5*time.Second, "how long each API server outage lasts (longer than -chaos.self-fence-after: the agents raise their fence); 0: none")
	flagOutageEv = flag.Duration("chaos.outage-every", 30*time.Second, "time between API server outages (the first at half of it)")
	flagReport   = flag.String("chaos.report", "", "also write the report to this file")
	flagKeep     = flag.Bool("chaos.keep", false, "keep the run's directory (component logs) instead of removing it")
)

// TestChaos runs the cluster's components as separate processes under a
// churn of short-lived pods with template claims, kills components with
// SIGKILL at random and restarts them, then settles and checks the
// invariants (see Rule*). It fails on any violation.
func TestChaos(t *testing.T) {
	if testing.Short() {
		t.Skip("the chaos run takes minutes")
	}
	dir, err := os.MkdirTemp("", "allot-chaos-")
	if err != nil {
		t.Fatal(err)
	}
	if *flagKeep {
		t.Logf("run directory (kept): %s", dir)
	} else {
		t.Cleanup(func() { os.RemoveAll(dir) })
	}
	// Both binaries at once: a cold build cache makes each take a while.
	var bins Binaries
	upstreamErr := make(chan error, 1)
	go func() {
		if *flagUpstream == 0 {
			upstreamErr <- nil
			return
		}
		var err error
		bins.UpstreamDriver, err = buildUpstreamDriver(dir)
		upstreamErr <- err
	}()
	bins.Allot, err = testproc.BuildAllot(dir)
	if uerr := <-upstreamErr; uerr != nil {
		t.Fatal(uerr)
	}
	if err != nil {
		t.Fatal(err)
	}
	cfg := Config{Duration: *flagDuration, Rate: *flagRate, KillInterval: *flagKill, Seed: *flagSeed,
		Nodes: *flagNodes, UpstreamNodes: *flagUpstream, SimNodes: *flagSimNodes, Replicas: *flagReplicas, Settle: *flagSettle,
		FenceAfter: *flagFence, Outage: *flagOutage, OutageEvery: *flagOutageEv, Log: logWriter{t}}
	if cfg.Outage > 0 && cfg.Outage <= cfg.FenceAfter {
		t.Fatalf("-chaos.outage %v must exceed -chaos.self-fence-after %v: the outages are there to raise the agents' fence", cfg.Outage, cfg.FenceAfter)
	}
	ctx, cancel := context.WithTimeout(context.Background(), cfg.Duration+5*cfg.Settle+5*time.Minute)
	defer cancel()
	rep, err := Run(ctx, bins, dir, cfg)
	if err != nil {
		t.Fatalf("chaos harness: %v (component logs in %s)", err, dir)
	}
	t.Log("\n" + rep.String())
	if *flagReport != "" {
		if err := os.WriteFile(*flagReport, []byte(rep.String()), 0o644); err != nil {
			t.Error(err)
		}
	}
	if len(rep.Violations) > 0 {
		t.Errorf("%d invariant violations (rerun with -chaos.keep to keep the component logs)", len(rep.Violations))
	}
}

// buildUpstreamDriver builds test/upstreamdriver, a DRA driver on the
// upstream kubeletplugin library, into dir.
func buildUpstreamDriver(dir string) (string, error) {
	root, err := testproc.ModuleRoot()
	if err != nil {
		return "", err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	bin := filepath.Join(dir, "upstreamdriver")
	cmd := exec.CommandContext(ctx, "go", "build", "-o", bin, "./test/upstreamdriver")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		return "", fmt.Errorf("build test/upstreamdriver: %w\n%s", err, out)
	}
	return bin, nil
}

// logWriter sends progress lines to the test log.
type logWriter struct{ t *testing.T }

func (w logWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p[:len(p)-1]))
	return len(p), nil
}
