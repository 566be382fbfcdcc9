package apiserver

import (
	"bytes"
	"context"
	"errors"
	"math/rand/v2"
	"net/http"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/internal/storage"
)

// serveWatch streams watch events as JSON lines, as kube-apiserver does.
// resourceVersion "" or "0" starts with synthetic ADDED events for every
// current object; a given version replays the changes after it, or answers
// 410 Gone (in an ERROR event) when it is older than the cache remembers.
func (s *Server) serveWatch(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	ctx := r.Context()
	pred, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.authorizeSelected(ctx, k, ri, "watch", fs); err != nil {
		writeError(w, err)
		return
	}
	c, err := s.cacheFor(k)
	if err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	timeout := s.cfg.MinWatchTimeout + time.Duration(rand.Int64N(int64(s.cfg.MinWatchTimeout)))
	if ts := q.Get("timeoutSeconds"); ts != "" {
		if n, err := strconv.ParseInt(ts, 10, 64); err == nil && n > 0 {
			timeout = time.Duration(n) * time.Second
		}
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	rvParam := q.Get("resourceVersion")
	var initial []storage.CachedObject
	from, err := parseRV(rvParam)
	if err != nil {
		writeError(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	// sendInitialEvents (client-go's streaming list): the state at least as
	// new as resourceVersion ("" = consistent), then a bookmark marking the
	// end of the initial events, then changes.
	sendInitial := isTrue(q.Get("sendInitialEvents"))
	if sendInitial || from == 0 {
		minRev := from
		if sendInitial && rvParam == "" {
			if minRev, err = s.store.CurrentRevision(ctx); err != nil {
				writeError(w, apiError(k, "", err))
				return
			}
		}
		initial, from, err = c.List(ctx, k.nsPrefix(ri.namespace), minRev, pred)
		if err != nil {
			writeError(w, apiError(k, "", err))
			return
		}
	}
	events, err := c.Watch(ctx, k.nsPrefix(ri.namespace), from, pred)
	if err != nil {
		if errors.Is(err, storage.ErrCompacted) {
			s.writeWatchStart(w)
			s.writeWatchError(w, apierrors.NewResourceExpired("too old resource version: "+rvParam))
			return
		}
		writeError(w, apiError(k, "", err))
		return
	}
	ww := &watchWriter{s: s, w: w, r: r, k: k, table: wantsTable(r), metadata: wantsMetadata(r),
		omitMF: wantsManagedFieldsOmitted(r), bookmarks: isTrue(q.Get("allowWatchBookmarks"))}
	s.writeWatchStart(w)
	for _, o := range initial {
		if !ww.send("ADDED", listed{o.KV.Value, o.KV.ModRevision, o.Decoded.Omit}) {
			return
		}
	}
	if sendInitial {
		ww.bookmark(from, true)
	}
	ww.flush()
	s.metrics.watchers.Inc()
	defer s.metrics.watchers.Dec()
	for {
		select {
		case <-ctx.Done():
			return
		case ev, ok := <-events:
			if !ok {
				return
			}
			if !ww.event(ev) || !ww.drain(events) || !ww.flush() {
				return
			}
		}
	}
}

// drain writes the events already waiting, without blocking, so that a
// burst goes out in one flush (one HTTP/2 DATA frame, one TLS record, one
// write) instead of one per event. It returns false when the watch is
// over: the channel closed (what was written is flushed) or a write failed.
func (ww *watchWriter) drain(events <-chan storage.CacheEvent) bool {
	for {
		select {
		case ev, ok := <-events:
			if !ok {
				ww.flush()
				return false
			}
			if !ww.event(ev) {
				return false
			}
		default:
			return true
		}
	}
}

func (s *Server) writeWatchStart(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Transfer-Encoding", "chunked")
	w.WriteHeader(http.StatusOK)
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

func (s *Server) writeWatchError(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	data, _ := marshalObj(&st)
	_, _ = w.Write([]byte(`{"type":"ERROR","object":`))
	_, _ = w.Write(data)
	_, _ = w.Write([]byte("}\n"))
	if f, ok := w.(http.Flusher); ok {
		f.Flush()
	}
}

type watchWriter struct {
	s         *Server
	w         http.ResponseWriter
	r         *http.Request
	k         *kind
	table     bool
	metadata  bool
	omitMF    bool // stored objects without managedFields (omit.go)
	bookmarks bool
	buf       bytes.Buffer
}

// event buffers one event (send flushes past 64 KiB); the caller flushes.
func (ww *watchWriter) event(ev storage.CacheEvent) bool {
	switch ev.Type {
	case storage.Added, storage.Modified, storage.Deleted:
		return ww.send(string(ev.Type), listed{ev.Object.KV.Value, ev.Object.KV.ModRevision, ev.Object.Decoded.Omit})
	case storage.Bookmark:
		if ww.bookmarks {
			ww.bookmark(ev.Revision, false)
		}
	}
	return true
}

func (ww *watchWriter) send(typ string, it listed) bool {
	stored, rev := it.value, it.rev
	ww.buf.WriteString(`{"type":"`)
	ww.buf.WriteString(typ)
	ww.buf.WriteString(`","object":`)
	if ww.metadata {
		data, err := metadataJSON(ww.k, []listed{it}, "", "", false)
		if err != nil {
			return false
		}
		ww.buf.Write(data)
	} else if ww.table {
		obj, err := decodeStored(ww.k, stored, rev)
		if err != nil {
			return false
		}
		data, err := ww.s.tableJSON(ww.r, ww.k, []runtime.Object{obj}, "", "", false)
		if err != nil {
			return false
		}
		ww.buf.Write(data)
	} else if err := writeViewJSON(&ww.buf, ww.k, it, ww.omitMF); err != nil {
		return false
	}
	ww.buf.WriteString("}\n")
	if ww.buf.Len() > 64<<10 {
		return ww.flush()
	}
	return true
}

func (ww *watchWriter) flush() bool {
	if ww.buf.Len() == 0 {
		return true
	}
	_, err := ww.w.Write(ww.buf.Bytes())
	ww.buf.Reset()
	if f, ok := ww.w.(http.Flusher); ok {
		f.Flush()
	}
	return err == nil
}

// bookmark writes a BOOKMARK event at rev; endOfInitial marks the end of
// the initial events of a sendInitialEvents watch.
func (ww *watchWriter) bookmark(rev int64, endOfInitial bool) {
	ann := ""
	if endOfInitial {
		ann = `,"annotations":{"k8s.io/initial-events-end":"true"}`
	}
	// The object is of the kind the watch streams: the resource's own,
	// or PartialObjectMetadata or Table when the client asked for those
	// (a metadata informer cannot decode any other kind).
	kind, apiVersion := ww.k.gvk.Kind, ww.k.gvk.GroupVersion().String()
	switch {
	case ww.metadata:
		kind, apiVersion = "PartialObjectMetadata", "meta.k8s.io/v1"
	case ww.table:
		kind, apiVersion = "Table", "meta.k8s.io/v1"
	}
	obj := `{"kind":` + strconv.Quote(kind) + `,"apiVersion":` + strconv.Quote(apiVersion) +
		`,"metadata":{"resourceVersion":"` + strconv.FormatInt(rev, 10) + `"` + ann + `}}`
	ww.buf.WriteString(`{"type":"BOOKMARK","object":` + obj + "}\n")
}
