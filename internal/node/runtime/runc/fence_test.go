package runc

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	rt "allot.dev/allot/internal/node/runtime"
)

// TestShimFence: the shim of a fenced container kills it once the agent's
// local heartbeat is older than the fence time, with no call from the
// agent; an unfenced container beside it keeps running.
func TestShimFence(t *testing.T) {
	t.Parallel()
	r := newTestRuntime(t, "")
	hb := filepath.Join(t.TempDir(), "heartbeat")
	if err := os.WriteFile(hb, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	// The agent's heartbeat: touched every 100ms until stopped.
	stop, stopped := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(stopped)
		tick := time.NewTicker(100 * time.Millisecond)
		defer tick.Stop()
		for {
			select {
			case <-stop:
				return
			case now := <-tick.C:
				_ = os.Chtimes(hb, now, now)
			}
		}
	}()
	fencedSpec := spec(t, "fenced", "sleep", "600")
	fencedSpec.Fence = &rt.Fence{HeartbeatFile: hb, After: 2 * time.Second}
	fenced := run(t, r, fencedSpec)
	free := run(t, r, spec(t, "free", "sleep", "600"))
	if st, err := r.Status(ctxT(t), fenced); err != nil || st.State != rt.StateRunning {
		close(stop)
		t.Fatalf("fenced container while the heartbeat is fresh: %+v, %v", st, err)
	}

	// The agent stops heartbeating (dead, or cut from the API server).
	close(stop)
	<-stopped
	st := waitExited(t, r, fenced)
	if st.Reason != ReasonFenced || st.Signal != 9 {
		t.Fatalf("fenced container = %+v, want killed with reason %s", st, ReasonFenced)
	}
	if st, err := r.Status(ctxT(t), free); err != nil || st.State != rt.StateRunning {
		t.Fatalf("unfenced container = %+v, %v; want running", st, err)
	}
	if err := r.Stop(ctxT(t), free, 0); err != nil {
		t.Fatal(err)
	}
}
