package logs

import (
	"fmt"
	"io"
	"net/http"
	"os"
	"time"

	"allot.dev/allot/internal/node/pods"
)

// stream writes the requested part of f, and with follow keeps writing
// what is appended until the attempt stops.
func (h *handler) stream(w http.ResponseWriter, r *http.Request, f *os.File, lr logRequest, snap *pods.Snapshot, attempt int) error {
	fi, err := f.Stat()
	if err != nil {
		return fmt.Errorf("stat log: %w", err)
	}
	start := int64(0)
	if lr.tailLines >= 0 {
		if start, err = tailOffset(f, fi.Size(), lr.tailLines); err != nil {
			return err
		}
	}
	if _, err := f.Seek(start, io.SeekStart); err != nil {
		return fmt.Errorf("seek log: %w", err)
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusOK)
	out := &limitWriter{w: w, n: lr.limitBytes}
	flusher, _ := w.(http.Flusher)
	buf := make([]byte, 32<<10)
	copyAll := func() error {
		for !out.done() {
			n, err := f.Read(buf)
			if n > 0 {
				if _, werr := out.Write(buf[:n]); werr != nil {
					return fmt.Errorf("write log: %w", werr)
				}
			}
			if err == io.EOF {
				return nil
			}
			if err != nil {
				return fmt.Errorf("read log: %w", err)
			}
		}
		return nil
	}
	if err := copyAll(); err != nil || !lr.follow || lr.previous {
		return err
	}
	tick := time.NewTicker(h.o.FollowPoll)
	defer tick.Stop()
	for !out.done() {
		if flusher != nil {
			flusher.Flush()
		}
		select {
		case <-r.Context().Done():
			return nil
		case <-tick.C:
		}
		// Read the state before the file: output written before the
		// container stopped is then certain to be copied below.
		live := h.stillRunning(lr, snap, attempt)
		if err := copyAll(); err != nil {
			return err
		}
		if !live {
			return nil
		}
	}
	return nil
}

// stillRunning reports whether the followed attempt may still write.
func (h *handler) stillRunning(lr logRequest, snap *pods.Snapshot, attempt int) bool {
	cur, ok := h.o.Lookup(lr.namespace, lr.pod)
	if !ok || cur.Key.UID != snap.Key.UID {
		return false
	}
	cs, ok := cur.Containers[lr.container]
	return ok && cs.Attempt == attempt && cs.Running
}
