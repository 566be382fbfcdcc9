package podfiles

import (
	"os"
	"path/filepath"
	"reflect"
	"testing"
	"time"

	corev1 "allot.dev/allot/api/core/v1"
)

func TestCheckpointRoundTrip(t *testing.T) {
	root := t.TempDir()
	k := PodKey{Namespace: "ns", Name: "web.v1", UID: "0b7c-11"}
	empty, err := LoadCheckpoint(root, k)
	if err != nil || empty.Phase != "" || len(empty.Done) != 0 {
		t.Fatalf("missing checkpoint = %+v, %v; want empty", empty, err)
	}
	at := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	cp := Checkpoint{Phase: corev1.PodSucceeded, Done: map[string]Finished{
		"init": {Attempt: 2, ExitCode: 0, Reason: "Completed", StartedAt: at, FinishedAt: at.Add(time.Second)},
	}}
	if err := SaveCheckpoint(root, k, cp); err != nil {
		t.Fatal(err)
	}
	got, err := LoadCheckpoint(root, k)
	if err != nil {
		t.Fatal(err)
	}
	cp.Version = checkpointVersion
	if !reflect.DeepEqual(got, cp) {
		t.Fatalf("loaded %+v, want %+v", got, cp)
	}
	entries, _ := os.ReadDir(PodDir(root, k))
	if len(entries) != 1 {
		t.Fatalf("pod dir holds %d entries, want only the checkpoint (no temporary files)", len(entries))
	}
}

func TestCorruptCheckpointIsAnError(t *testing.T) {
	root := t.TempDir()
	k := PodKey{Namespace: "ns", Name: "p", UID: "u"}
	if err := os.MkdirAll(PodDir(root, k), 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(PodDir(root, k), checkpointFile), []byte("{"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadCheckpoint(root, k); err == nil {
		t.Fatal("corrupt checkpoint loaded")
	}
}

func TestListPods(t *testing.T) {
	root := t.TempDir()
	want := PodKey{Namespace: "default", Name: "a.b", UID: "1234-abcd"}
	for _, d := range []string{PodDir(root, want), filepath.Join(PodsDir(root), "not-a-pod"), filepath.Join(PodsDir(root), "a_b")} {
		if err := os.MkdirAll(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	got, err := ListPods(root)
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != 1 || got[0] != want {
		t.Fatalf("ListPods = %+v, want [%+v]", got, want)
	}
	if none, err := ListPods(t.TempDir()); err != nil || len(none) != 0 {
		t.Fatalf("empty root: %v, %v", none, err)
	}
	if got := LogPath(root, want, "c", 3); got != filepath.Join(root, "pods", "default_a.b_1234-abcd", "c", "3.log") {
		t.Fatalf("LogPath = %s", got)
	}
}
