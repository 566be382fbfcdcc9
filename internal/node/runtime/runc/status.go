package runc

import (
	"context"
	"errors"
	"fmt"
	"os"
	"sort"

	rt "allot.dev/allot/internal/node/runtime"
)

// Status reports one container from its bundle: exit.json (the shim's
// record of the exit) wins; otherwise a container with started.json runs
// while its shim lives. Only when the shim is gone without recording an
// exit (it was killed, or the machine rebooted) is runc asked; a process
// runc no longer sees is then Exited with reason ContainerStatusUnknown.
func (r *Runtime) Status(ctx context.Context, id string) (rt.ContainerStatus, error) {
	b, err := r.bundle(id)
	if err != nil {
		return rt.ContainerStatus{}, err
	}
	rec, err := b.load()
	if err != nil {
		return rt.ContainerStatus{}, fmt.Errorf("container %s: %w", id, err)
	}
	return r.status(ctx, b, rec, nil)
}

// status derives a status; states, if not nil, is a `runc list` result
// used instead of calling `runc state`.
func (r *Runtime) status(ctx context.Context, b bundle, rec record, states map[string]runcState) (rt.ContainerStatus, error) {
	st := rec.status()
	st.State = rt.StateCreated
	s, started := b.started()
	if started {
		st.StartedAt, st.PID = s.StartedAt, s.PID
	}
	if e, ok := b.exited(); ok {
		setExit(&st, e)
		return st, nil
	}
	if !started {
		return st, nil // created, or its shim is starting it right now
	}
	if b.shimAlive() {
		st.State = rt.StateRunning
		return st, nil
	}
	// The shim was killed, or it just wrote exit.json and exited.
	if e, ok := b.exited(); ok {
		setExit(&st, e)
		return st, nil
	}
	rs, err := r.runcState(ctx, rec.ID, states)
	switch {
	case err == nil && (rs.Status == "running" || rs.Status == "paused"):
		st.State, st.PID = rt.StateRunning, rs.PID
	case err == nil && rs.Status == "stopped", errors.Is(err, errNoContainer):
		setExit(&st, exitRecord{ExitCode: exitCodeUnknown, Reason: reasonUnknown,
			Message: "the container's exit status was lost: its shim died before it exited"})
	case err != nil:
		return rt.ContainerStatus{}, fmt.Errorf("inspect container %s: %w", rec.ID, err)
	default:
		st.State = rt.StateUnknown
		st.Message = "runc reports state " + rs.Status
	}
	return st, nil
}

func (r *Runtime) runcState(ctx context.Context, id string, states map[string]runcState) (runcState, error) {
	if states == nil {
		return r.runc.state(ctx, id)
	}
	if s, ok := states[id]; ok {
		return s, nil
	}
	return runcState{}, errNoContainer
}

func setExit(st *rt.ContainerStatus, e exitRecord) {
	st.State = rt.StateExited
	st.PID = 0
	st.ExitCode, st.Signal = e.ExitCode, e.Signal
	st.FinishedAt = e.FinishedAt
	st.Reason, st.Message = e.Reason, e.Message
}

// List reports every container with a bundle, sorted by creation time.
// `runc list` is called at most once, and only if some shim is gone.
func (r *Runtime) List(ctx context.Context) ([]rt.ContainerStatus, error) {
	entries, err := os.ReadDir(r.dir)
	if err != nil {
		return nil, fmt.Errorf("list containers: %w", err)
	}
	var states map[string]runcState
	out := make([]rt.ContainerStatus, 0, len(entries))
	for _, e := range entries {
		if !e.IsDir() {
			continue
		}
		b := bundle(r.dir + "/" + e.Name())
		rec, err := b.load()
		if err != nil {
			continue // being created or removed right now
		}
		if _, started := b.started(); started && states == nil && !b.shimAlive() {
			if states, err = r.runc.list(ctx); err != nil {
				return nil, fmt.Errorf("list containers: %w", err)
			}
		}
		st, err := r.status(ctx, b, rec, states)
		if err != nil {
			return nil, fmt.Errorf("list containers: %w", err)
		}
		out = append(out, st)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].CreatedAt.Before(out[j].CreatedAt) })
	return out, nil
}
