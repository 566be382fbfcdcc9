package runc

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"sort"
	"strings"
	"syscall"
	"time"

	rt "allot.dev/allot/internal/node/runtime"
)

const (
	// startTimeout bounds Start when its context has no deadline.
	startTimeout = createTimeout + 30*time.Second
	// killTimeout bounds the wait for an exit after SIGKILL.
	killTimeout = 10 * time.Second
	// pollInterval is how often Stop and Remove look for an exit.
	pollInterval = 50 * time.Millisecond
)

// Start launches the container's shim and waits for its report: nil once
// the container process runs, else the reason (also recorded as a
// StartError status). If ctx ends first the shim carries on alone.
func (r *Runtime) Start(ctx context.Context, id string) error {
	b, err := r.bundle(id)
	if err != nil {
		return err
	}
	if _, err := b.load(); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	if _, ok := b.started(); ok || b.shimAlive() {
		return fmt.Errorf("start container %s: already started", id)
	}
	if _, ok := b.exited(); ok {
		return fmt.Errorf("start container %s: already ran", id)
	}
	if _, err := os.Stat(b.path(configFile)); err != nil {
		return fmt.Errorf("start container %s: incomplete bundle: %w", id, err)
	}
	readyR, err := r.spawnShim(b)
	if err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	defer readyR.Close()
	deadline, ok := ctx.Deadline()
	if !ok {
		deadline = time.Now().Add(startTimeout)
	}
	if err := readyR.SetReadDeadline(deadline); err != nil {
		return fmt.Errorf("start container %s: %w", id, err)
	}
	stop := context.AfterFunc(ctx, func() { _ = readyR.SetReadDeadline(time.Now()) })
	defer stop()
	msg, err := io.ReadAll(readyR)
	if err != nil {
		return fmt.Errorf("start container %s: wait for shim: %w", id, err)
	}
	switch s := strings.TrimSpace(string(msg)); {
	case s == "ok":
		return nil
	case strings.HasPrefix(s, "error: "):
		return fmt.Errorf("start container %s: %s", id, strings.TrimPrefix(s, "error: "))
	default:
		return fmt.Errorf("start container %s: shim exited without a report (see %s)", id, b.path(shimLogFile))
	}
}

// spawnShim starts the shim in a new session with fd 3 the write end of
// the returned pipe. The shim is reaped by a goroutine while this process
// lives; if it dies first the shim is re-parented and carries on.
func (r *Runtime) spawnShim(b bundle) (*os.File, error) {
	logf, err := os.OpenFile(b.path(shimLogFile), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("open shim log: %w", err)
	}
	defer logf.Close()
	readyR, readyW, err := os.Pipe()
	if err != nil {
		return nil, fmt.Errorf("make shim pipe: %w", err)
	}
	defer readyW.Close()
	// No CommandContext: the shim must outlive every request and the agent.
	cmd := exec.Command(r.shim[0], append(r.shim[1:], string(b))...)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.Env = append(os.Environ(), shimEnv+"=1")
	cmd.ExtraFiles = []*os.File{readyW}
	cmd.Dir = "/"
	cmd.SysProcAttr = &syscall.SysProcAttr{Setsid: true}
	if err := cmd.Start(); err != nil {
		readyR.Close()
		return nil, fmt.Errorf("run shim %s: %w", r.shim[0], err)
	}
	go func() { _ = cmd.Wait() }() // only reaps; the outcome comes through the pipe
	return readyR, nil
}

// Stop sends SIGTERM, waits up to grace for the exit, then SIGKILL; it
// returns once the process has exited. Created or exited containers are
// left as they are.
func (r *Runtime) Stop(ctx context.Context, id string, grace time.Duration) error {
	b, err := r.bundle(id)
	if err != nil {
		return err
	}
	rec, err := b.load()
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	st, err := r.status(ctx, b, rec, nil)
	if err != nil {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	if st.State != rt.StateRunning {
		return nil
	}
	if grace > 0 {
		if err := r.runc.kill(ctx, id, "TERM"); err != nil && !isGone(err) {
			return fmt.Errorf("stop container %s: %w", id, err)
		}
		if r.waitExit(ctx, b, grace) {
			return nil
		}
	}
	if err := r.runc.kill(ctx, id, "KILL"); err != nil && !isGone(err) {
		return fmt.Errorf("stop container %s: %w", id, err)
	}
	if !r.waitExit(ctx, b, killTimeout) {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("stop container %s: %w", id, err)
		}
		return fmt.Errorf("stop container %s: still running %s after SIGKILL", id, killTimeout)
	}
	return nil
}

func isGone(err error) bool {
	return errors.Is(err, errNotRunning) || errors.Is(err, errNoContainer)
}

// waitExit polls until the container has exited (its exit is recorded, or
// its shim is gone), for at most d or until ctx ends.
func (r *Runtime) waitExit(ctx context.Context, b bundle, d time.Duration) bool {
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		if r.exitedNow(ctx, b) {
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case <-tick.C:
		}
	}
}

// exitedNow reports whether the container's process is gone: its exit is
// recorded, or (its shim having died) runc no longer sees it running.
func (r *Runtime) exitedNow(ctx context.Context, b bundle) bool {
	if _, ok := b.exited(); ok {
		return true
	}
	if b.shimAlive() {
		return false
	}
	st, err := r.runc.state(ctx, b.id())
	return errors.Is(err, errNoContainer) || (err == nil && st.Status == "stopped")
}

// Remove kills the container if it still runs, deletes it from runc,
// unmounts its rootfs and removes its bundle. The log file stays.
func (r *Runtime) Remove(ctx context.Context, id string) error {
	b, err := r.bundle(id)
	if err != nil {
		return err
	}
	if _, err := b.load(); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	if err := r.Stop(ctx, id, 0); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	if err := r.runc.delete(ctx, id); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	// A shim that is still starting the container would write into the
	// bundle; wait for it to finish before removing the directory.
	if !r.waitExit(ctx, b, killTimeout) {
		return fmt.Errorf("remove container %s: its shim is still running", id)
	}
	if err := r.destroy(b); err != nil {
		return fmt.Errorf("remove container %s: %w", id, err)
	}
	return nil
}

// destroy unmounts and deletes a bundle directory.
func (r *Runtime) destroy(b bundle) error {
	if err := unmountRootfs(b); err != nil {
		return err
	}
	if err := os.RemoveAll(string(b)); err != nil {
		return fmt.Errorf("remove bundle: %w", err)
	}
	return nil
}

var _ rt.Releaser = (*Runtime)(nil)

// Release unmounts the rootfs of a container that is not running and keeps
// its bundle (record, exit status), for an agent that shuts down and stops
// what it ran. Remove a container that never started instead: released, it
// could not start.
func (r *Runtime) Release(ctx context.Context, id string) error {
	b, err := r.bundle(id)
	if err != nil {
		return err
	}
	rec, err := b.load()
	if err != nil {
		return fmt.Errorf("release container %s: %w", id, err)
	}
	st, err := r.status(ctx, b, rec, nil)
	if err != nil {
		return fmt.Errorf("release container %s: %w", id, err)
	}
	if st.State == rt.StateRunning {
		return fmt.Errorf("release container %s: still running", id)
	}
	if b.shimAlive() {
		// A shim that recorded the exit ends right after it: Stop returns
		// on the record, so allot down gets here in that instant.
		if _, exited := b.exited(); !exited || !r.waitShimGone(ctx, b, killTimeout) {
			return fmt.Errorf("release container %s: still running", id)
		}
	}
	if err := unmountRootfs(b); err != nil {
		return fmt.Errorf("release container %s: %w", id, err)
	}
	return nil
}

// shimWaitHook, if set (tests), is called when waitShimGone starts
// waiting.
var shimWaitHook func()

// waitShimGone polls until the bundle's shim has ended, for at most d or
// until ctx ends.
func (r *Runtime) waitShimGone(ctx context.Context, b bundle, d time.Duration) bool {
	if shimWaitHook != nil {
		shimWaitHook()
	}
	timer := time.NewTimer(d)
	defer timer.Stop()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for b.shimAlive() {
		select {
		case <-ctx.Done():
			return false
		case <-timer.C:
			return false
		case <-tick.C:
		}
	}
	return true
}

// PurgeRuncState deletes every container runc keeps under this runtime's
// runc root (`runc delete --force`: a container still running is killed
// first) and returns how many it deleted. Bundles, exit records and logs
// stay. Only for when no agent uses the root: allot down, holding the data
// dir's lock, after it stopped and released the containers. Containers of
// other runc roots (other data dirs, other runtimes) are never touched.
func (r *Runtime) PurgeRuncState(ctx context.Context) (int, error) {
	states, err := r.runc.list(ctx)
	if err != nil {
		return 0, fmt.Errorf("list runc containers: %w", err)
	}
	ids := make([]string, 0, len(states))
	for id := range states {
		ids = append(ids, id)
	}
	sort.Strings(ids)
	n := 0
	var errs []error
	for _, id := range ids {
		if _, err := r.runc.run(ctx, "delete", "--force", id); err != nil {
			if !errors.Is(err, errNoContainer) {
				errs = append(errs, fmt.Errorf("delete runc container %s: %w", id, err))
			}
			continue
		}
		n++
	}
	return n, errors.Join(errs...)
}
