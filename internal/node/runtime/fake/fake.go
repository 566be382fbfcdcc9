// Package fake is a container runtime without processes, for simulated
// nodes in scale tests and for the node agent's own tests: Start marks a
// container Running, Stop marks it Exited. Command and args are never
// interpreted; annotations on the ContainerSpec script the behaviour:
//
//	allot.dev/fake-exit-after: 2s      exit on its own 2s after Start
//	allot.dev/fake-exit-code: "3"      with this code (default 0)
//	allot.dev/fake-start-error: "msg"  Start fails with msg (StartError)
//	allot.dev/fake-ignore-term: "true" Stop waits the whole grace period,
//	                                   then "kills" it (137, SIGKILL)
//
// Stopping a container that handles SIGTERM yields exit code 0. Exits are
// computed lazily from the start time, so a container costs one small
// struct and no goroutine or timer: thousands of simulated nodes fit in
// one process.
//
// With Options.StateDir every container is also kept as a JSON file there,
// so a restarted agent using the same directory adopts its containers
// (same IDs and start times), as with the runc runtime.
package fake

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"tags.cncf.io/container-device-interface/pkg/parser"

	rt "allot.dev/allot/internal/node/runtime"
)

// Annotations that script a fake container (see the package doc).
const (
	AnnotationExitAfter  = "allot.dev/fake-exit-after"
	AnnotationExitCode   = "allot.dev/fake-exit-code"
	AnnotationStartError = "allot.dev/fake-start-error"
	AnnotationIgnoreTerm = "allot.dev/fake-ignore-term"
)

// Version is reported as "fake://VERSION".
const Version = "0.1.0"

// Options configure a fake Runtime; the zero value is a purely in-memory
// runtime on the real clock.
type Options struct {
	// StateDir, if set, persists containers (one JSON file each).
	StateDir string
	// Now is the clock (default time.Now).
	Now func() time.Time
}

// Runtime is the fake runtime. It is safe for concurrent use.
type Runtime struct {
	dir    string
	now    func() time.Time
	prefix string

	mu         sync.Mutex
	seq        uint64
	containers map[string]*container
}

var _ rt.Runtime = (*Runtime)(nil)

// container is one simulated container; it is also the persisted form.
type container struct {
	Status     rt.ContainerStatus `json:"status"`
	ExitAfter  time.Duration      `json:"exitAfter,omitempty"`
	ExitCode   int32              `json:"exitCode,omitempty"`
	StartError string             `json:"startError,omitempty"`
	IgnoreTerm bool               `json:"ignoreTerm,omitempty"`
	LogPath    string             `json:"logPath,omitempty"`
}

// New makes a fake runtime, loading the containers of o.StateDir if set.
func New(o Options) (*Runtime, error) {
	var rnd [4]byte
	if _, err := rand.Read(rnd[:]); err != nil {
		return nil, fmt.Errorf("make id prefix: %w", err)
	}
	r := &Runtime{dir: o.StateDir, now: o.Now, prefix: "fake-" + hex.EncodeToString(rnd[:]),
		containers: map[string]*container{}}
	if r.now == nil {
		r.now = time.Now
	}
	if r.dir != "" {
		if err := r.load(); err != nil {
			return nil, err
		}
	}
	return r, nil
}

// Name is "fake".
func (r *Runtime) Name() string { return "fake" }

// RuntimeVersion is "fake://" + Version.
func (r *Runtime) RuntimeVersion(context.Context) string { return "fake://" + Version }

// SupportsCDI is true: CDI names are checked for syntax and accepted.
func (r *Runtime) SupportsCDI() bool { return true }

// Create records a container; malformed CDI names or fake annotations are
// errors.
func (r *Runtime) Create(_ context.Context, cs rt.ContainerSpec) (string, error) {
	if cs.PodName == "" || cs.Name == "" || cs.Image == "" {
		return "", errors.New("create container: pod name, container name and image are required")
	}
	for _, n := range cs.CDIDevices {
		if _, _, _, err := parser.ParseQualifiedName(n); err != nil {
			return "", fmt.Errorf("create container %s: CDI device %q: %w", cs.Name, n, err)
		}
	}
	c, err := scripted(cs)
	if err != nil {
		return "", fmt.Errorf("create container %s: %w", cs.Name, err)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	r.seq++
	c.Status = rt.ContainerStatus{
		ID: fmt.Sprintf("%s-%d", r.prefix, r.seq), PodUID: cs.PodUID, PodNamespace: cs.PodNamespace,
		PodName: cs.PodName, Name: cs.Name, Attempt: cs.Attempt, State: rt.StateCreated, CreatedAt: r.now(),
	}
	if err := r.save(c); err != nil {
		return "", fmt.Errorf("create container %s: %w", cs.Name, err)
	}
	r.containers[c.Status.ID] = c
	return c.Status.ID, nil
}

// scripted reads the fake annotations.
func scripted(cs rt.ContainerSpec) (*container, error) {
	a := cs.Annotations
	c := &container{StartError: a[AnnotationStartError], LogPath: cs.LogPath}
	if v, ok := a[AnnotationExitAfter]; ok {
		d, err := time.ParseDuration(v)
		if err != nil || d <= 0 {
			return nil, fmt.Errorf("annotation %s=%q: want a positive duration", AnnotationExitAfter, v)
		}
		c.ExitAfter = d
	}
	if v, ok := a[AnnotationExitCode]; ok {
		n, err := strconv.ParseInt(v, 10, 32)
		if err != nil || n < 0 || n > 255 {
			return nil, fmt.Errorf("annotation %s=%q: want 0..255", AnnotationExitCode, v)
		}
		c.ExitCode = int32(n)
	}
	if v, ok := a[AnnotationIgnoreTerm]; ok {
		b, err := strconv.ParseBool(v)
		if err != nil {
			return nil, fmt.Errorf("annotation %s=%q: want a boolean", AnnotationIgnoreTerm, v)
		}
		c.IgnoreTerm = b
	}
	return c, nil
}

// Start marks the container Running (or fails it as scripted) and appends
// a line to its log file, if it has one.
func (r *Runtime) Start(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	if c.Status.State != rt.StateCreated {
		return fmt.Errorf("start container %s: already started", id)
	}
	now := r.now()
	if c.StartError != "" {
		c.exit(now, 128, 0, "StartError", c.StartError)
		return errors.Join(fmt.Errorf("start container %s: %s", id, c.StartError), r.save(c))
	}
	c.Status.State, c.Status.StartedAt = rt.StateRunning, now
	if err := r.save(c); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	if err := appendLog(c.LogPath, fmt.Sprintf("fake container %s of pod %s/%s started\n",
		c.Status.Name, c.Status.PodNamespace, c.Status.PodName)); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	return nil
}

func appendLog(path, line string) error {
	if path == "" {
		return nil
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return fmt.Errorf("create log dir: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o640)
	if err != nil {
		return fmt.Errorf("open log: %w", err)
	}
	_, err = f.WriteString(line)
	return errors.Join(err, f.Close())
}

func (c *container) exit(at time.Time, code, sig int32, reason, msg string) {
	c.Status.State, c.Status.PID = rt.StateExited, 0
	c.Status.ExitCode, c.Status.Signal, c.Status.FinishedAt = code, sig, at
	c.Status.Reason, c.Status.Message = reason, msg
}

// settle applies a scripted exit whose time has come.
func (c *container) settle(now time.Time) {
	if c.Status.State != rt.StateRunning || c.ExitAfter <= 0 {
		return
	}
	if at := c.Status.StartedAt.Add(c.ExitAfter); !now.Before(at) {
		reason := "Completed"
		if c.ExitCode != 0 {
			reason = "Error"
		}
		c.exit(at, c.ExitCode, 0, reason, "")
	}
}

// get returns a container with its scripted exit applied; r.mu is held.
func (r *Runtime) get(id string) (*container, error) {
	c, ok := r.containers[id]
	if !ok {
		return nil, rt.ErrNotFound
	}
	c.settle(r.now())
	return c, nil
}

// Status reports one container.
func (r *Runtime) Status(_ context.Context, id string) (rt.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	c, err := r.get(id)
	if err != nil {
		return rt.ContainerStatus{}, fmt.Errorf("container %s: %w", id, err)
	}
	return c.Status, nil
}

// Stop ends a running container: at once with exit code 0, or, for a
// container that ignores SIGTERM, after the grace period with 137.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	r.mu.Lock()
	c, err := r.get(id)
	if err != nil {
		r.mu.Unlock()
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	running, ignore := c.Status.State == rt.StateRunning, c.IgnoreTerm
	r.mu.Unlock()
	if !running {
		return nil
	}
	code, sig, reason := int32(0), int32(0), "Completed"
	if ignore {
		if grace > 0 {
			t := time.NewTimer(grace)
			select {
			case <-ctx.Done():
				t.Stop()
				return fmt.Errorf("stop container %s: %w", id, ctx.Err())
			case <-t.C:
			}
		}
		code, sig, reason = 128+int32(syscall.SIGKILL), int32(syscall.SIGKILL), "Error"
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	if c, err = r.get(id); err != nil || c.Status.State != rt.StateRunning {
		return nil // removed or exited meanwhile
	}
	c.exit(r.now(), code, sig, reason, "")
	if err := r.save(c); err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	return nil
}

// Remove forgets a container (a running one is dropped as if killed).
func (r *Runtime) Remove(_ context.Context, id string) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.containers[id]; !ok {
		return fmt.Errorf("remove container %s: %w", id, rt.ErrNotFound)
	}
	if r.dir != "" {
		if err := os.Remove(r.file(id)); err != nil && !errors.Is(err, os.ErrNotExist) {
			return fmt.Errorf("remove container %s: %w", id, err)
		}
	}
	delete(r.containers, id)
	return nil
}

// List reports every container, oldest first.
func (r *Runtime) List(context.Context) ([]rt.ContainerStatus, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.now()
	out := make([]rt.ContainerStatus, 0, len(r.containers))
	for _, c := range r.containers {
		c.settle(now)
		out = append(out, c.Status)
	}
	sort.Slice(out, func(i, j int) bool {
		if !out[i].CreatedAt.Equal(out[j].CreatedAt) {
			return out[i].CreatedAt.Before(out[j].CreatedAt)
		}
		return strings.Compare(out[i].ID, out[j].ID) < 0
	})
	return out, nil
}
