package devicemanager

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	"allot.dev/allot/internal/node/pods"
)

func TestCheckpointSurvivesRestart(t *testing.T) {
	dir, cpDir := socketDir(t), t.TempDir()
	withCheckpoint := func(o *Options) { o.CheckpointDir = cpDir }
	m1 := startManager(t, dir, withCheckpoint)
	s := newStub(t, dir, "gpu.sock", gpu, dev("a", true), dev("b", true), dev("c", true)).start()
	m1.waitServing(t, gpu, 3)
	running := makePod("running").ask("c", gpu, 2).obj()
	mustAdmit(t, m1, running)
	held := m1.ids("running", "c", gpu)
	m1.Stop()
	s.stop()

	m2 := startManager(t, dir, withCheckpoint)
	if got := m2.ids("running", "c", gpu); !slices.Equal(got, held) {
		t.Fatalf("after restart running holds %v, want %v", got, held)
	}
	if st := m2.res(gpu).State; st != StateRestored {
		t.Fatalf("state = %s, want Restored", st)
	}
	// Until the plugin registers again, pods wait rather than run
	// without their devices.
	wantVerdict(t, admit(t, m2, running), pods.Hold, ReasonPluginNotReady)
	wantVerdict(t, admit(t, m2, makePod("new").ask("c", gpu, 1).obj()), pods.Hold, ReasonPluginNotReady)
	if _, err := m2.ContainerOptions(context.Background(), running, &running.Spec.Containers[0]); err != nil {
		t.Fatalf("ContainerOptions from the checkpoint: %v", err)
	}

	s2 := newStub(t, dir, "gpu.sock", gpu, dev("a", true), dev("b", true), dev("c", true)).start()
	m2.waitServing(t, gpu, 3)
	mustAdmit(t, m2, running)
	if got := m2.ids("running", "c", gpu); !slices.Equal(got, held) {
		t.Fatalf("re-admission moved running from %v to %v", held, got)
	}
	opts, err := m2.ContainerOptions(context.Background(), running, &running.Spec.Containers[0])
	if err != nil || len(opts.Env) != 1 || len(opts.Devices) != 1 {
		t.Fatalf("ContainerOptions after restart = %+v, %v", opts, err)
	}
	mustAdmit(t, m2, makePod("new").ask("c", gpu, 1).obj())
	if got := m2.ids("new", "c", gpu)[0]; slices.Contains(held, got) {
		t.Fatalf("device %s handed out twice", got)
	}
	wantVerdict(t, admit(t, m2, makePod("more").ask("c", gpu, 1).obj()), pods.Reject, ReasonInsufficientDevices)
	s2.mu.Lock()
	calls := len(s2.allocs)
	s2.mu.Unlock()
	if calls != 1 {
		t.Fatalf("plugin saw %d Allocate calls after restart, want 1 (only the new pod)", calls)
	}
}

func TestRestoredPreStartPluginBlocksContainerStart(t *testing.T) {
	dir, cpDir := socketDir(t), t.TempDir()
	m1 := startManager(t, dir, func(o *Options) { o.CheckpointDir = cpDir })
	s := newStub(t, dir, "gpu.sock", gpu, dev("a", true))
	s.opts.PreStartRequired = true
	s.start()
	m1.waitServing(t, gpu, 1)
	pod := makePod("p").ask("c", gpu, 1).obj()
	mustAdmit(t, m1, pod)
	m1.Stop()
	s.stop()

	m2 := startManager(t, dir, func(o *Options) { o.CheckpointDir = cpDir })
	// An adopted container restarting before its plugin is back.
	if _, err := m2.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0]); !errors.Is(err, ErrPluginNotServing) {
		t.Fatalf("ContainerOptions = %v, want ErrPluginNotServing", err)
	}
	s2 := newStub(t, dir, "gpu.sock", gpu, dev("a", true))
	s2.opts.PreStartRequired = true
	s2.start()
	m2.waitServing(t, gpu, 1)
	if _, err := m2.ContainerOptions(context.Background(), pod, &pod.Spec.Containers[0]); err != nil {
		t.Fatal(err)
	}
	s2.mu.Lock()
	defer s2.mu.Unlock()
	if len(s2.preStarts) != 1 {
		t.Fatalf("PreStartContainer calls = %v, want 1", s2.preStarts)
	}
}

func TestRestoredResourceExpiresAfterGrace(t *testing.T) {
	dir, cpDir := socketDir(t), t.TempDir()
	m1 := startManager(t, dir, func(o *Options) { o.CheckpointDir = cpDir })
	newStub(t, dir, "gpu.sock", gpu, dev("a", true)).start()
	m1.waitServing(t, gpu, 1)
	mustAdmit(t, m1, makePod("p").ask("c", gpu, 1).obj())
	m1.Stop()

	m2 := startManager(t, dir, func(o *Options) { o.CheckpointDir = cpDir })
	waitFor(t, "restored resource removed", func() bool { return m2.res(gpu).State == StateRemoved })
	wantVerdict(t, admit(t, m2, makePod("new").ask("c", gpu, 1).obj()), pods.Reject, ReasonResourceUnavailable)
	// A pod that holds devices is still never run without them.
	wantVerdict(t, admit(t, m2, makePod("p").ask("c", gpu, 1).obj()), pods.Hold, ReasonPluginNotReady)
}

func TestReleaseIsCheckpointed(t *testing.T) {
	dir, cpDir := socketDir(t), t.TempDir()
	m1 := startManager(t, dir, func(o *Options) { o.CheckpointDir = cpDir })
	newStub(t, dir, "gpu.sock", gpu, dev("a", true)).start()
	m1.waitServing(t, gpu, 1)
	pod := makePod("p").ask("c", gpu, 1).obj()
	mustAdmit(t, m1, pod)
	if err := m1.Release(context.Background(), pod); err != nil {
		t.Fatal(err)
	}
	m1.Stop()
	m2, err := New(Options{Dir: dir, CheckpointDir: cpDir})
	if err != nil {
		t.Fatal(err)
	}
	if got := m2.PodDevices("p"); len(got) != 0 {
		t.Fatalf("released pod still holds %v after restart", got)
	}
}

func TestCorruptCheckpointIsRefused(t *testing.T) {
	dir, cpDir := socketDir(t), t.TempDir()
	m1 := startManager(t, dir, func(o *Options) { o.CheckpointDir = cpDir })
	newStub(t, dir, "gpu.sock", gpu, dev("a", true)).start()
	m1.waitServing(t, gpu, 1)
	mustAdmit(t, m1, makePod("p").ask("c", gpu, 1).obj())
	m1.Stop()

	path := filepath.Join(cpDir, CheckpointFile)
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tampered := bytes.Replace(data, []byte(`"deviceIDs":["a"]`), []byte(`"deviceIDs":["b"]`), 1)
	if bytes.Equal(tampered, data) {
		t.Fatalf("checkpoint has no device a: %s", data)
	}
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{Dir: dir, CheckpointDir: cpDir}); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("New with a tampered checkpoint = %v, want ErrCorruptCheckpoint", err)
	}
}
