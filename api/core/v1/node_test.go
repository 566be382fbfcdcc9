package v1

import "testing"

func TestNodeNameFromHost(t *testing.T) {
	for host, want := range map[string]string{
		"Worker-2.Lab": "worker-2.lab",
		"gpu_box#1":    "gpubox1",
		"-.edge.-":     "edge",
		"___":          "node",
		"":             "node",
	} {
		if got := NodeNameFromHost(host); got != want {
			t.Errorf("NodeNameFromHost(%q) = %q, want %q", host, got, want)
		}
	}
}
