package main

import (
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"google.golang.org/grpc"
	pluginapi "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
)

// The standalone binary and `allot example device-plugin`, built once.
var standalone, allot string

func TestMain(m *testing.M) { os.Exit(run(m)) }

func run(m *testing.M) int {
	dir, err := os.MkdirTemp("", "dp-bin")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	standalone, allot = filepath.Join(dir, "device-plugin"), filepath.Join(dir, "allot")
	for bin, pkg := range map[string]string{standalone: "allot.dev/allot/examples/device-plugin", allot: "allot.dev/allot/cmd/allot"} {
		if out, err := exec.Command("go", "build", "-o", bin, pkg).CombinedOutput(); err != nil {
			fmt.Fprintf(os.Stderr, "build %s: %v\n%s", pkg, err, out)
			return 1
		}
	}
	return m.Run()
}

// TestSameFlags: both commands offer the same flags.
func TestSameFlags(t *testing.T) {
	names := func(re string, args ...string) []string {
		out, _ := exec.Command(args[0], args[1:]...).CombinedOutput() // -h exits 0 or 2
		if _, flags, ok := strings.Cut(string(out), "\nFlags:\n"); ok {
			out = []byte(flags) // cobra: skip the examples
		}
		if own, _, ok := strings.Cut(string(out), "\nGlobal Flags:\n"); ok {
			out = []byte(own) // cobra: flags every allot command has (--gc-percent)
		}
		var got []string
		for _, m := range regexp.MustCompile(re).FindAllStringSubmatch(string(out), -1) {
			if m[1] != "help" {
				got = append(got, m[1])
			}
		}
		slices.Sort(got)
		return got
	}
	want := []string{"cdi-dir", "config", "control", "dir", "poll"}
	if got := names(`(?m)^  -([a-z-]+) `, standalone, "-h"); !slices.Equal(got, want) {
		t.Errorf("device-plugin -h lists %v, want %v", got, want)
	}
	if got := names(`(?m)^\s+(?:-h, )?--([a-z-]+)`, allot, "example", "device-plugin", "--help"); !slices.Equal(got, want) {
		t.Errorf("allot example device-plugin --help lists %v, want %v", got, want)
	}
}

// TestCommandsServe runs each command as its own process: it registers,
// writes its CDI spec, and on SIGTERM removes the spec and exits 0.
func TestCommandsServe(t *testing.T) {
	for name, cmdline := range map[string]func(cfg, dir, cdi, control string) []string{
		"device-plugin": func(cfg, dir, cdi, control string) []string {
			return []string{standalone, "-config", cfg, "-dir", dir, "-cdi-dir", cdi, "-control", control, "-poll", "20ms"}
		},
		"allot example device-plugin": func(cfg, dir, cdi, control string) []string {
			return []string{allot, "example", "device-plugin", "--config", cfg, "--dir", dir, "--cdi-dir", cdi, "--control", control, "--poll", "20ms"}
		},
	} {
		t.Run(name, func(t *testing.T) {
			dir, err := os.MkdirTemp("", "dp")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(dir) })
			files := t.TempDir()
			cfg, cdi := filepath.Join(files, "devices.yaml"), filepath.Join(files, "cdi")
			if err := os.WriteFile(cfg, []byte("resourceName: example.com/gpu\ncdiKind: example.com/gpu\ndevices: [{id: gpu-0, path: /dev/null}]\n"), 0o600); err != nil {
				t.Fatal(err)
			}
			regs := startKubelet(t, dir)
			args := cmdline(cfg, dir, cdi, filepath.Join(files, "unhealthy"))
			cmd := exec.Command(args[0], args[1:]...)
			var stderr syncWriter
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() {
				_ = cmd.Process.Kill() // only this child, by PID; a no-op once it exited
				if t.Failed() {
					t.Logf("%s stderr:\n%s", name, stderr.String())
				}
			})
			select {
			case r := <-regs:
				if r.ResourceName != "example.com/gpu" || r.Endpoint != "example-device-plugin.sock" {
					t.Fatalf("registration = %+v", r)
				}
			case err := <-exited:
				t.Fatalf("exited before registering: %v", err)
			case <-time.After(30 * time.Second):
				t.Fatal("timed out waiting for registration")
			}
			spec := filepath.Join(cdi, "example_com-gpu.json")
			if _, err := os.Stat(spec); err != nil {
				t.Fatalf("CDI spec: %v", err)
			}
			if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
				t.Fatal(err)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("exit after SIGTERM: %v, want status 0", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("no exit after SIGTERM")
			}
			if _, err := os.Stat(spec); !errors.Is(err, os.ErrNotExist) {
				t.Fatalf("CDI spec after exit: stat err = %v, want not exist", err)
			}
		})
	}
}

// registration records registrations on a real kubelet.sock.
type registration struct {
	pluginapi.UnimplementedRegistrationServer
	reqs chan *pluginapi.RegisterRequest
}

func (r *registration) Register(_ context.Context, req *pluginapi.RegisterRequest) (*pluginapi.Empty, error) {
	r.reqs <- req
	return &pluginapi.Empty{}, nil
}

func startKubelet(t *testing.T, dir string) <-chan *pluginapi.RegisterRequest {
	t.Helper()
	lis, err := net.Listen("unix", filepath.Join(dir, "kubelet.sock"))
	if err != nil {
		t.Fatal(err)
	}
	r := &registration{reqs: make(chan *pluginapi.RegisterRequest, 10)}
	srv := grpc.NewServer()
	pluginapi.RegisterRegistrationServer(srv, r)
	go func() { _ = srv.Serve(lis) }()
	t.Cleanup(srv.Stop)
	return r.reqs
}

// syncWriter collects a child's stderr for the failure log.
type syncWriter struct {
	mu  sync.Mutex
	buf strings.Builder
}

func (w *syncWriter) Write(p []byte) (int, error) {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.Write(p)
}

func (w *syncWriter) String() string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.buf.String()
}
