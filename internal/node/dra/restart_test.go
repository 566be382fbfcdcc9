package dra

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/node/dra/dratest"
	"allot.dev/allot/pkg/client"
)

func TestRestartFromCheckpoint(t *testing.T) {
	e := newEnv(t)
	first := e.start()
	p := e.plugin(first, gpuDriver)
	keep := e.readyPod("keep", "keep", gpuDriver)
	gone := e.readyPod("gone", "gone", gpuDriver)
	done := e.readyPod("done", "done", gpuDriver)
	for _, pod := range []*corev1.Pod{keep, gone, done} {
		wantAdmitted(t, admit(t, first, pod))
	}
	if n := len(p.Prepared()); n != 3 {
		t.Fatalf("%d prepare calls, want 3", n)
	}
	first.Stop() // the plugin keeps running, as across an agent restart

	// While no manager runs: one pod is deleted, one finishes.
	zero := int64(0)
	if err := e.admin.Pods(e.ns).Delete(callCtx(t), "gone", metav1.DeleteOptions{GracePeriodSeconds: &zero}); err != nil {
		t.Fatalf("delete pod: %v", err)
	}
	done.Status.Phase = corev1.PodSucceeded
	if _, err := e.admin.Pods(e.ns).UpdateStatus(callCtx(t), done); err != nil {
		t.Fatalf("finish pod: %v", err)
	}

	second := e.start()
	// Answered from the checkpoint, before the driver is even back.
	if got := containerDevices(t, second, keep); !slices.Equal(got, []string{dratest.DeviceFor("keep")}) {
		t.Fatalf("devices of the adopted pod %q", got)
	}
	if st := p.Status(t); !st.PluginRegistered {
		t.Fatalf("plugin not registered again: %s", st.Error)
	}
	eventually(t, "claims of the deleted and the finished pod unprepared", func() (bool, string) {
		var names []string
		for _, call := range claimNames(p.Unprepared()) {
			names = append(names, call...)
		}
		slices.Sort(names)
		return slices.Equal(names, []string{"done", "gone"}), ""
	})
	eventually(t, "finished pod's condition", func() (bool, string) {
		c := e.unpreparedCondition("done")
		return c != nil && c.Status == corev1.ConditionTrue, ""
	})
	wantAdmitted(t, admit(t, second, keep))
	if n := len(p.Prepared()); n != 3 {
		t.Fatalf("%d prepare calls after the restart, want still 3: nothing is prepared twice", n)
	}
	if err := release(t, second, keep); err != nil {
		t.Fatalf("Release: %v", err)
	}
	if n := len(p.Unprepared()); n != 3 {
		t.Fatalf("%d unprepare calls, want 3", n)
	}
}

func TestCheckpointRoundTripAndCorruption(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, CheckpointFile)
	s, err := loadClaimStore(path)
	if err != nil {
		t.Fatalf("load of a missing checkpoint: %v", err)
	}
	s.claims["u1"] = &claimRecord{UID: "u1", Namespace: "ns", Name: "c1",
		Handles: []handleRecord{{Driver: gpuDriver, Data: "d", Structured: []byte(`{"nodeName":"n"}`), Prepared: true, CDIDevices: []string{"example.com/dra=c1"}}},
		Pods:    []podRef{{UID: "p1", Name: "pod-1"}, {UID: "p2", Name: "pod-2"}}}
	if err := s.save(); err != nil {
		t.Fatalf("save: %v", err)
	}
	back, err := loadClaimStore(path)
	if err != nil {
		t.Fatalf("load: %v", err)
	}
	if got, want := back.snapshot(), s.snapshot(); len(got) != 1 || got[0].Name != want[0].Name ||
		!slices.Equal(got[0].Pods, want[0].Pods) || !slices.Equal(got[0].Handles[0].CDIDevices, want[0].Handles[0].CDIDevices) ||
		string(got[0].Handles[0].Structured) != string(want[0].Handles[0].Structured) {
		t.Fatalf("restored %+v, want %+v", got, want)
	}

	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	tampered := slices.Clone(data)
	for i := range tampered {
		if tampered[i] == '1' { // in the data, before the checksum: valid JSON, wrong checksum
			tampered[i] = '2'
			break
		}
	}
	if err := os.WriteFile(path, tampered, 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadClaimStore(path); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("load of a tampered checkpoint: %v, want ErrCorruptCheckpoint", err)
	}
	c, err := client.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := New(Options{NodeName: "n", Client: c, RegistryDir: dir, CheckpointDir: dir}); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("New with a corrupt checkpoint: %v, want ErrCorruptCheckpoint", err)
	}
	if err := os.WriteFile(path, []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := loadClaimStore(path); !errors.Is(err, ErrCorruptCheckpoint) {
		t.Fatalf("load of a truncated checkpoint: %v, want ErrCorruptCheckpoint", err)
	}
}

func TestOptionsValidation(t *testing.T) {
	c, err := client.NewForConfig(&rest.Config{Host: "http://127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		opts Options
		want string
	}{
		{"no node", Options{Client: c, RegistryDir: "/x"}, "NodeName is required"},
		{"bad node", Options{NodeName: "Bad_Node", Client: c, RegistryDir: "/x"}, "is not a DNS subdomain"},
		{"no client", Options{NodeName: "n", RegistryDir: "/x"}, "Client is required"},
		{"no registry", Options{NodeName: "n", Client: c}, "RegistryDir is required"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := New(tc.opts)
			if !errors.Is(err, ErrInvalidOptions) || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("New: %v, want %q", err, tc.want)
			}
		})
	}
}

func TestKeyedMutexOrdersAndForgets(t *testing.T) {
	var k keyedMutex
	done := make(chan struct{})
	for range 50 {
		go func() {
			unlock := k.lock([]types.UID{"b", "a", "b"})
			unlock()
			done <- struct{}{}
		}()
		go func() {
			unlock := k.lock([]types.UID{"a", "c", "b"})
			unlock()
			done <- struct{}{}
		}()
	}
	for range 100 {
		<-done
	}
	if len(k.locks) != 0 {
		t.Fatalf("%d locks left after every holder unlocked", len(k.locks))
	}
}
