package apiserver

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"strconv"

	jsonv2 "github.com/go-json-experiment/json"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"

	"allot.dev/allot/internal/storage"
)

// decoderFor builds the watch cache decoder of a kind: labels and
// selectable fields, from one decode per stored change.
func (s *Server) decoderFor(k *kind) storage.DecodeFunc {
	// Admission reads namespaces on every create, and every binding reads
	// its node: keep those decoded. They are few next to pods and claims,
	// whose decoded copies would multiply the cache's memory.
	//
	// What it does not keep it decodes without managedFields (skipped,
	// never built: it reads labels and fields, and serves the stored
	// bytes), recording where they are (mfSpan) for lists and watches that
	// ask for the objects without them.
	keepObject := k.gvk.Group == "" && (k.resource == "namespaces" || k.resource == "nodes")
	if k.lightDecode != nil {
		return func(_ string, value []byte) (storage.Decoded, error) { return k.lightDecode(value) }
	}
	decode := func(value []byte, opts jsonv2.Options) (storage.Decoded, error) {
		if k.sibling != nil {
			obj, sk, err := decodeNativeWith(k, value, 0, opts)
			if err != nil {
				return storage.Decoded{}, err
			}
			fs := sk.fieldSet(obj)
			siblingFields(sk, obj, fs)
			fs[StoredVersionField] = sk.gvk.GroupVersion().String()
			return storage.Decoded{Labels: labelsOf(obj), Fields: fs}, nil
		}
		obj, err := decodeStoredWith(k, value, 0, opts)
		if err != nil {
			return storage.Decoded{}, err
		}
		d := storage.Decoded{Labels: labelsOf(obj), Fields: k.fieldSet(obj)}
		if keepObject {
			d.Object = obj
		}
		return d, nil
	}
	if keepObject { // cachedGet hands out copies, managedFields and all
		return func(_ string, value []byte) (storage.Decoded, error) { return decode(value, storedJSON) }
	}
	return func(_ string, value []byte) (storage.Decoded, error) {
		return decodeRecording(value, func(opts jsonv2.Options) (storage.Decoded, error) { return decode(value, opts) })
	}
}

func labelsOf(obj runtime.Object) map[string]string {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil
	}
	return acc.GetLabels()
}

// fieldSet is the kind's selectable fields plus name and namespace.
func (k *kind) fieldSet(obj runtime.Object) map[string]string {
	set := fields.Set{}
	if k.fields != nil {
		set = k.fields(obj)
	}
	if acc, err := meta.Accessor(obj); err == nil {
		set["metadata.name"] = acc.GetName()
		if k.namespaced {
			set["metadata.namespace"] = acc.GetNamespace()
		}
	}
	return set
}

// selectors parses labelSelector and fieldSelector into a predicate, and
// returns the field selector's requirements for the authorizer.
func selectors(r *http.Request) (storage.Predicate, fields.Requirements, error) {
	q := r.URL.Query()
	ls, err := labels.Parse(q.Get("labelSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("invalid labelSelector: " + err.Error())
	}
	fs, err := fields.ParseSelector(q.Get("fieldSelector"))
	if err != nil {
		return nil, nil, apierrors.NewBadRequest("invalid fieldSelector: " + err.Error())
	}
	if ls.Empty() && fs.Empty() {
		return nil, nil, nil
	}
	return func(d storage.Decoded) bool {
		return ls.Matches(labels.Set(d.Labels)) && fs.Matches(fields.Set(d.Fields))
	}, fs.Requirements(), nil
}

func (s *Server) serveGet(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	ctx := r.Context()
	if err := s.authorize(ctx, k, ri, "get", nil, nil); err != nil {
		writeError(w, err)
		return
	}
	kv, err := s.store.Get(ctx, k.storageKey(ri.namespace, ri.name))
	if err != nil {
		writeError(w, apiError(k, ri.name, err))
		return
	}
	if wantsMetadata(r) {
		data, err := metadataJSON(k, []listed{{value: kv.Value, rev: kv.ModRevision}}, "", "", false)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeRawJSON(w, http.StatusOK, data)
		return
	}
	if wantsTable(r) {
		obj, err := decodeStored(k, kv.Value, kv.ModRevision)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		s.writeTable(w, r, k, []runtime.Object{obj}, "", "")
		return
	}
	data, err := viewJSON(k, kv.Value, kv.ModRevision)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writeRawJSON(w, http.StatusOK, data)
}

// listed is one object of a list answer.
type listed struct {
	value []byte
	rev   int64
	omit  storage.Span // managedFields in value, when the watch cache knows
}

func (s *Server) serveList(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	ctx := r.Context()
	// A malformed selector is a 400 before authorization, which judges
	// list by its field selector.
	pred, fs, err := selectors(r)
	if err != nil {
		writeError(w, err)
		return
	}
	if err := s.authorizeSelected(ctx, k, ri, "list", fs); err != nil {
		writeError(w, err)
		return
	}
	q := r.URL.Query()
	limit, _ := strconv.ParseInt(q.Get("limit"), 10, 64)
	var items []listed
	var rev int64
	var cont string
	if limit > 0 || q.Get("continue") != "" {
		items, rev, cont, err = s.listFromStore(ctx, k, ri.namespace, limit, q.Get("continue"), q.Get("resourceVersion"), pred)
	} else {
		items, rev, err = s.listFromCache(ctx, k, ri.namespace, q.Get("resourceVersion"), pred)
	}
	if err != nil {
		writeError(w, apiError(k, "", err))
		return
	}
	if wantsMetadata(r) {
		data, err := metadataJSON(k, items, strconv.FormatInt(rev, 10), cont, true)
		if err != nil {
			writeError(w, apierrors.NewInternalError(err))
			return
		}
		writeRawJSON(w, http.StatusOK, data)
		return
	}
	if wantsTable(r) {
		objs := make([]runtime.Object, 0, len(items))
		for _, it := range items {
			obj, err := decodeStored(k, it.value, it.rev)
			if err != nil {
				writeError(w, apierrors.NewInternalError(err))
				return
			}
			objs = append(objs, obj)
		}
		s.writeTable(w, r, k, objs, strconv.FormatInt(rev, 10), cont)
		return
	}
	data, err := encodeList(k, items, rev, cont, wantsManagedFieldsOmitted(r))
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	writeRawJSON(w, http.StatusOK, data)
}

func encodeList(k *kind, items []listed, rev int64, cont string, omitMF bool) ([]byte, error) {
	var buf bytes.Buffer
	size := 128
	for _, it := range items {
		size += len(it.value) + 32
	}
	buf.Grow(size)
	apiVersion := k.gvk.GroupVersion().String()
	buf.WriteString(`{"kind":` + strconv.Quote(k.gvk.Kind+"List") + `,"apiVersion":` + strconv.Quote(apiVersion))
	buf.WriteString(`,"metadata":{"resourceVersion":"` + strconv.FormatInt(rev, 10) + `"`)
	if cont != "" {
		buf.WriteString(`,"continue":` + strconv.Quote(cont))
	}
	buf.WriteString(`},"items":[`)
	for i, it := range items {
		if i > 0 {
			buf.WriteByte(',')
		}
		if err := writeViewJSON(&buf, k, it, omitMF); err != nil {
			return nil, err
		}
	}
	buf.WriteString("]}")
	return buf.Bytes(), nil
}

// listFromCache serves a list from the watch cache. resourceVersion "" asks
// for a consistent read: the cache first catches up with etcd's revision.
func (s *Server) listFromCache(ctx context.Context, k *kind, ns, rvParam string, pred storage.Predicate) ([]listed, int64, error) {
	c, err := s.cacheFor(k)
	if err != nil {
		return nil, 0, err
	}
	minRev, err := s.minRevision(ctx, rvParam)
	if err != nil {
		return nil, 0, err
	}
	objs, rev, err := c.List(ctx, k.nsPrefix(ns), minRev, pred)
	if err != nil {
		return nil, 0, err
	}
	out := make([]listed, len(objs))
	for i, o := range objs {
		out[i] = listed{value: o.KV.Value, rev: o.KV.ModRevision, omit: o.Decoded.Omit}
	}
	return out, rev, nil
}

func (s *Server) minRevision(ctx context.Context, rvParam string) (int64, error) {
	if rvParam == "" {
		return s.store.CurrentRevision(ctx)
	}
	rv, err := parseRV(rvParam)
	if err != nil {
		return 0, apierrors.NewBadRequest(err.Error())
	}
	return rv, nil
}

// listFromStore pages through etcd, consistent across pages.
func (s *Server) listFromStore(ctx context.Context, k *kind, ns string, limit int64, cont, rvParam string, pred storage.Predicate) ([]listed, int64, string, error) {
	opts := storage.ListOptions{Limit: limit, Continue: cont}
	if cont == "" && rvParam != "" && rvParam != "0" {
		rv, err := parseRV(rvParam)
		if err != nil {
			return nil, 0, "", apierrors.NewBadRequest(err.Error())
		}
		opts.Revision = rv
	}
	var out []listed
	decode := s.decoderFor(k)
	for {
		res, err := s.store.List(ctx, k.nsPrefix(ns), opts)
		if err != nil {
			return nil, 0, "", err
		}
		for _, kv := range res.Items {
			if pred != nil {
				d, err := decode(kv.Key, kv.Value)
				if err != nil || !pred(d) {
					continue
				}
			}
			out = append(out, listed{value: kv.Value, rev: kv.ModRevision})
		}
		if res.Continue == "" || limit <= 0 || int64(len(out)) >= limit {
			return out, res.Revision, res.Continue, nil
		}
		opts = storage.ListOptions{Limit: limit - int64(len(out)), Continue: res.Continue}
	}
}

// marshalObj encodes an object for an answer.
func marshalObj(obj runtime.Object) ([]byte, error) {
	return json.Marshal(obj)
}
