package apiserver

// Conformance of the upstream kubelet-plugin library
// (k8s.io/dynamic-resource-allocation v0.37.2, unmodified, from the module
// cache) against this server, as a node-driver DRIVER@NODE credential:
// the ResourceSlice controller (generateName, owner references, updates,
// deletes with preconditions, watch-list, the round-trip check behind
// DroppedFieldsError) and the claim client (the v1 → v1beta2 → v1beta1
// NotFound cycle). See docs/design/kubelet-dra-v1.md §2, §3 and §7 slice 2.

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	apiequality "k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	resourcev1ac "k8s.io/client-go/applyconfigurations/resource/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	draclient "k8s.io/dynamic-resource-allocation/client"
	"k8s.io/dynamic-resource-allocation/resourceslice"
	"k8s.io/utils/ptr"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/apiserver/auth"
)

const (
	kpDriver = "gpu.example.com"
	kpNode   = "node-1"
	kpToken  = "node-driver-gpu-node-1" // gpu.example.com@node-1
	kpOther  = "node-2"
)

func init() {
	testUsers[kpToken] = auth.User{Name: kpDriver + "@" + kpNode, Role: auth.RoleNodeDriver}
}

// apiCall is one request a client sent and the answer's code.
type apiCall struct {
	method, path, contentType string
	query                     url.Values
	body                      []byte // DELETE only
	code                      int
}

func (c apiCall) String() string {
	return fmt.Sprintf("%s %s?%s → %d", c.method, c.path, c.query.Encode(), c.code)
}

// callRecorder is a client transport that records every request.
type callRecorder struct {
	next  http.RoundTripper
	mu    sync.Mutex
	calls []apiCall
}

func (r *callRecorder) RoundTrip(req *http.Request) (*http.Response, error) {
	c := apiCall{method: req.Method, path: req.URL.Path, query: req.URL.Query(), contentType: req.Header.Get("Content-Type")}
	if req.Method == http.MethodDelete && req.Body != nil {
		body, err := io.ReadAll(req.Body)
		req.Body.Close()
		if err != nil {
			return nil, err
		}
		c.body = body
		req = req.Clone(req.Context())
		req.Body = io.NopCloser(bytes.NewReader(body))
	}
	res, err := r.next.RoundTrip(req)
	if res != nil {
		c.code = res.StatusCode
	}
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	return res, err
}

// matching returns the recorded calls for which keep is true.
func (r *callRecorder) matching(keep func(apiCall) bool) []apiCall {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []apiCall
	for _, c := range r.calls {
		if keep(c) {
			out = append(out, c)
		}
	}
	return out
}

func (r *callRecorder) reset() {
	r.mu.Lock()
	r.calls = nil
	r.mu.Unlock()
}

// contentMode is how a driver configures its rest.Config.
type contentMode string

const (
	// contentDefault leaves ContentType unset: client-go v0.37's generated
	// clients for resource.k8s.io/v1 and core/v1 nodes then prefer
	// protobuf bodies (gentype PrefersProtobuf) and accept protobuf or JSON.
	contentDefault  contentMode = "default"
	contentJSON     contentMode = "json"
	contentProtobuf contentMode = "protobuf"
)

// kpClientset is a real client-go clientset of the test server as the user
// with token; every request it sends is recorded.
func kpClientset(t *testing.T, token string, mode contentMode) (kubernetes.Interface, *callRecorder) {
	t.Helper()
	rec := &callRecorder{}
	cfg := &rest.Config{Host: testSrv.URL, BearerToken: token, QPS: 1000, Burst: 1000,
		WrapTransport: func(rt http.RoundTripper) http.RoundTripper { rec.next = rt; return rec }}
	switch mode {
	case contentJSON:
		cfg.ContentType = "application/json"
	case contentProtobuf:
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return cs, rec
}

// kpNodeUID creates the node (an admin's job) if needed and returns its UID.
func kpNodeUID(t *testing.T, name string) types.UID {
	t.Helper()
	ensureNode(t, name)
	var n corev1.Node
	r := admin(t, "GET", "/api/v1/nodes/"+name, nil)
	expect(t, r, 200)
	r.into(t, &n)
	return n.UID
}

// errorCollector is the controller's ErrorHandler: it keeps every error.
type errorCollector struct {
	mu   sync.Mutex
	errs []error
}

func (e *errorCollector) handle(_ context.Context, err error, msg string) {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.errs = append(e.errs, fmt.Errorf("%s: %w", msg, err))
}

func (e *errorCollector) get() []error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return append([]error(nil), e.errs...)
}

// eventually polls cond until it holds or the timeout passes.
func eventually(t *testing.T, timeout time.Duration, what string, cond func() (bool, string)) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		ok, state := cond()
		if ok {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: not within %v; last state: %s", what, timeout, state)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kpPool is the node's pool in four steps: 0 the first publication (a
// counter-set slice and a device slice), 1 one device changed and one
// removed (one slice updated), 2 a third slice added (a new generation),
// 3 no pool (every slice deleted). The devices use every field of a
// node-local slice that allot accepts (api/validation V1Features):
// attributes of each scalar type, capacity, taints with effects
// NoSchedule and None (with and without timeAdded), shared counters and
// consumesCounters, and the gated booleans at false.
func kpPool(step int, added time.Time) *resourceslice.DriverResources {
	if step == 3 {
		return &resourceslice.DriverResources{}
	}
	gi := resource.MustParse("1Gi")
	device := func(i int, model string) resourcev1.Device {
		return resourcev1.Device{
			Name: fmt.Sprintf("gpu-%d", i),
			Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{
				"index":                {IntValue: ptr.To(int64(i))},
				"model":                {StringValue: ptr.To(model)},
				"driverVersion":        {VersionValue: ptr.To("1.2.3-rc.1")},
				"healthy":              {BoolValue: ptr.To(true)},
				"gpu.example.com/uuid": {StringValue: ptr.To(fmt.Sprintf("GPU-%08d", i))},
			},
			Capacity: map[resourcev1.QualifiedName]resourcev1.DeviceCapacity{
				"memory":                {Value: resource.MustParse("40Gi")},
				"gpu.example.com/cores": {Value: resource.MustParse("108")},
			},
			ConsumesCounters: []resourcev1.DeviceCounterConsumption{{
				CounterSet: "gpu-counters",
				Counters:   map[string]resourcev1.Counter{"memory": {Value: resource.MustParse("40Gi")}, "slots": {Value: resource.MustParse("1")}},
			}},
			Taints: []resourcev1.DeviceTaint{
				{Key: "example.com/maintenance", Value: "planned", Effect: resourcev1.DeviceTaintEffectNoSchedule},
				{Key: "example.com/degraded", Effect: resourcev1.DeviceTaintEffectNone, TimeAdded: &metav1.Time{Time: added}},
			},
			AllowMultipleAllocations: ptr.To(false),
			BindsToNode:              ptr.To(false),
		}
	}
	counters := resourceslice.Slice{SharedCounters: []resourcev1.CounterSet{{
		Name: "gpu-counters",
		Counters: map[string]resourcev1.Counter{
			"memory": {Value: *resource.NewQuantity(160*gi.Value(), resource.BinarySI)},
			"slots":  {Value: resource.MustParse("4")},
		},
	}}}
	var slices []resourceslice.Slice
	switch step {
	case 0:
		slices = []resourceslice.Slice{counters, {Devices: []resourcev1.Device{device(0, "LATEST-GPU-MODEL"), device(1, "LATEST-GPU-MODEL")}}}
	case 1:
		slices = []resourceslice.Slice{counters, {Devices: []resourcev1.Device{device(0, "NEXT-GPU-MODEL")}}}
	case 2:
		slices = []resourceslice.Slice{counters, {Devices: []resourcev1.Device{device(0, "NEXT-GPU-MODEL")}},
			{Devices: []resourcev1.Device{device(2, "LATEST-GPU-MODEL"), device(3, "LATEST-GPU-MODEL")}}}
	}
	return &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{kpNode: {Slices: slices}}}
}

// kpSlices lists the node's slices of the driver, as an admin, by name.
func kpSlices(t *testing.T, node string) []resourcev1.ResourceSlice {
	t.Helper()
	sel := fields.Set{resourcev1.ResourceSliceSelectorDriver: kpDriver, resourcev1.ResourceSliceSelectorNodeName: node}.String()
	list, err := v1Client(t, "admin", false).ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: sel})
	if err != nil {
		t.Fatalf("list slices: %v", err)
	}
	sort.Slice(list.Items, func(i, j int) bool { return list.Items[i].Name < list.Items[j].Name })
	return list.Items
}

// slicesMatch reports whether the stored slices are the pool as desired:
// one slice per desired slice, named by its index, of one generation.
func slicesMatch(stored []resourcev1.ResourceSlice, want *resourceslice.DriverResources) (bool, string) {
	pool, ok := want.Pools[kpNode]
	if !ok {
		return len(stored) == 0, fmt.Sprintf("%d slices stored, want none", len(stored))
	}
	var names []string
	for _, s := range stored {
		names = append(names, fmt.Sprintf("%s(gen %d, %d devices)", s.Name, s.Spec.Pool.Generation, len(s.Spec.Devices)))
	}
	state := strings.Join(names, ", ")
	if len(stored) != len(pool.Slices) {
		return false, state
	}
	for i, s := range stored {
		d := pool.Slices[i]
		if !strings.HasPrefix(s.Name, fmt.Sprintf("%05x-", i)) || s.Spec.Pool.Generation != stored[0].Spec.Pool.Generation ||
			s.Spec.Pool.ResourceSliceCount != int64(len(pool.Slices)) || s.Spec.Pool.Name != kpNode ||
			!resourceslice.DevicesDeepEqual(s.Spec.Devices, d.Devices) ||
			!apiequality.Semantic.DeepEqual(s.Spec.SharedCounters, d.SharedCounters) {
			return false, state
		}
	}
	return true, state
}

// TestKubeletPluginSliceController runs the library's ResourceSlice
// controller as gpu.example.com@node-1 through one pool's life, with the
// rest.Config content types drivers use.
func TestKubeletPluginSliceController(t *testing.T) {
	t.Parallel()
	nodeUID := kpNodeUID(t, kpNode)
	for _, mode := range []contentMode{contentJSON, contentProtobuf, contentDefault} {
		t.Run(string(mode), func(t *testing.T) {
			start := time.Now()
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			cs, rec := kpClientset(t, kpToken, mode)
			errs := &errorCollector{}
			noErrors := func(step string) {
				t.Helper()
				if e := errs.get(); len(e) > 0 {
					var dropped *resourceslice.DroppedFieldsError
					for _, err := range e {
						if errors.As(err, &dropped) {
							t.Errorf("%s: DroppedFieldsError, disabled features %v:\ndesired %+v\nactual  %+v", step, dropped.DisabledFeatures(),
								dropped.DesiredSlice.Spec, dropped.ActualSlice.Spec)
						}
					}
					t.Fatalf("%s: the controller reported errors: %v", step, e)
				}
			}
			owner := &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: kpNode, UID: nodeUID}
			if mode == contentProtobuf {
				// The library looks the UID up itself: GET /api/v1/nodes/node-1.
				owner.UID = ""
			}
			added := time.Now().Add(-time.Hour).Truncate(time.Second).UTC()
			want := kpPool(0, added)
			ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
				DriverName:       kpDriver,
				KubeClient:       cs,
				Owner:            owner,
				Resources:        want,
				SyncDelay:        ptr.To(50 * time.Millisecond),
				MutationCacheTTL: ptr.To(200 * time.Millisecond),
				ErrorHandler:     errs.handle,
			})
			if err != nil {
				t.Fatalf("start controller: %v", err)
			}
			defer ctrl.Stop()

			// The informer synced through a watch-list, not a LIST.
			ownSelector := fields.Set{"spec.driver": kpDriver, "spec.nodeName": kpNode}.String()
			if wl := rec.matching(func(c apiCall) bool {
				return c.method == "GET" && strings.HasSuffix(c.path, "/resourceslices") && c.query.Get("sendInitialEvents") == "true"
			}); len(wl) == 0 || wl[0].code != 200 || wl[0].query.Get("resourceVersionMatch") != "NotOlderThan" ||
				wl[0].query.Get("allowWatchBookmarks") != "true" ||
				wl[0].query.Get("fieldSelector") != ownSelector {
				t.Fatalf("no watch-list request of the node's slices: %v", wl)
			}
			if lists := rec.matching(func(c apiCall) bool {
				return c.method == "GET" && strings.HasSuffix(c.path, "/resourceslices") && c.query.Get("watch") == ""
			}); len(lists) > 0 {
				t.Fatalf("the informer fell back to LIST: %v", lists)
			}

			settle := func(step int, want *resourceslice.DriverResources, stats resourceslice.Stats) []resourcev1.ResourceSlice {
				t.Helper()
				var stored []resourcev1.ResourceSlice
				eventually(t, 5*time.Second, fmt.Sprintf("step %d: stored slices follow the pool", step), func() (bool, string) {
					stored = kpSlices(t, kpNode)
					ok, state := slicesMatch(stored, want)
					return ok, fmt.Sprintf("%s; controller errors: %v", state, errs.get())
				})
				// Past the sync delay and the mutation cache TTL, the
				// controller writes nothing more: no update loop.
				time.Sleep(300 * time.Millisecond)
				noErrors(fmt.Sprintf("step %d", step))
				if got := ctrl.GetStats(); got != stats {
					t.Fatalf("step %d: controller stats %+v, want %+v", step, got, stats)
				}
				return stored
			}

			// Step 0: created with generateName, owned by the Node.
			stored := settle(0, want, resourceslice.Stats{NumCreates: 2})
			for i, s := range stored {
				prefix := fmt.Sprintf("%05x-%s-%s-", i, kpDriver, kpNode)
				if s.GenerateName != prefix || !strings.HasPrefix(s.Name, prefix) || len(s.Name) <= len(prefix) {
					t.Errorf("slice %d: name %q generateName %q, want a name generated from %q", i, s.Name, s.GenerateName, prefix)
				}
				if len(s.OwnerReferences) != 1 || !apiequality.Semantic.DeepEqual(s.OwnerReferences[0], metav1.OwnerReference{APIVersion: "v1", Kind: "Node", Name: kpNode,
					UID: nodeUID, Controller: ptr.To(true)}) {
					t.Errorf("slice %s: owner references %+v", s.Name, s.OwnerReferences)
				}
				if s.Spec.NodeName == nil || *s.Spec.NodeName != kpNode || s.Spec.Driver != kpDriver {
					t.Errorf("slice %s: nodeName %v driver %q", s.Name, s.Spec.NodeName, s.Spec.Driver)
				}
			}
			dev := stored[1].Spec.Devices[0]
			if len(dev.Taints) != 2 || dev.Taints[0].TimeAdded == nil || dev.Taints[1].TimeAdded == nil ||
				!dev.Taints[1].TimeAdded.Time.Equal(added) || dev.AllowMultipleAllocations == nil || dev.BindsToNode == nil {
				t.Errorf("stored device %+v: want timeAdded stamped on the first taint, kept on the second, and the false booleans kept", dev)
			}
			if mode == contentProtobuf {
				if got := rec.matching(func(c apiCall) bool { return c.method == "GET" && c.path == "/api/v1/nodes/"+kpNode }); len(got) != 1 || got[0].code != 200 {
					t.Errorf("node lookup: %v", got)
				}
			}
			wantType := "application/vnd.kubernetes.protobuf"
			if mode == contentJSON {
				wantType = "application/json"
			}
			for _, c := range rec.matching(func(c apiCall) bool { return c.method == "POST" }) {
				if c.code != 201 || c.contentType != wantType {
					t.Errorf("create %v sent as %q, want %s and 201", c, c.contentType, wantType)
				}
			}

			// The raw watch-list of a node-driver: the node's slices, then
			// the bookmark that ends the initial events.
			kpWatchListBookmark(t, stored)

			// Step 1: one device changed, one removed: one update.
			ctrl.Update(kpPool(1, added))
			settle(1, kpPool(1, added), resourceslice.Stats{NumCreates: 2, NumUpdates: 1})

			// Step 2: a third slice: a new generation for all.
			ctrl.Update(kpPool(2, added))
			stored = settle(2, kpPool(2, added), resourceslice.Stats{NumCreates: 3, NumUpdates: 3})

			// Step 3: no pool: every slice deleted with UID and
			// resourceVersion preconditions.
			rec.reset()
			ctrl.Update(kpPool(3, added))
			settle(3, kpPool(3, added), resourceslice.Stats{NumCreates: 3, NumUpdates: 3, NumDeletes: 3})
			deletes := rec.matching(func(c apiCall) bool { return c.method == "DELETE" && strings.Contains(c.path, "/resource.k8s.io/v1/") })
			for _, s := range stored {
				found := false
				for _, c := range deletes {
					if strings.HasSuffix(c.path, "/resourceslices/"+s.Name) && c.code == 200 {
						found = true
						// The preconditions are in the body, JSON or protobuf;
						// both carry the strings as they are.
						if !bytes.Contains(c.body, []byte(s.UID)) || !bytes.Contains(c.body, []byte(s.ResourceVersion)) {
							t.Errorf("delete of %s without UID %s and resourceVersion %s preconditions: %q", s.Name, s.UID, s.ResourceVersion, c.body)
						}
						if mode == contentJSON && !bytes.Contains(c.body, []byte(`"preconditions"`)) {
							t.Errorf("delete of %s: body %s", s.Name, c.body)
						}
					}
				}
				if !found {
					t.Errorf("slice %s was not deleted by the controller: %v", s.Name, deletes)
				}
			}
			// A repeated delete (the informer behind) goes round the
			// versions on NotFound; every other version answers 404, so
			// the client ends on v1.
			for _, c := range rec.matching(func(c apiCall) bool {
				return !strings.Contains(c.path, "/resource.k8s.io/v1/") && strings.Contains(c.path, "/resource.k8s.io/")
			}) {
				if c.code != 404 {
					t.Errorf("request to another resource.k8s.io version answered %d, want 404: %v", c.code, c)
				}
			}
			noErrors("end")
			t.Logf("%s: %v", mode, time.Since(start))
		})
	}
}

// kpWatchListBookmark opens the watch-list that client-go's informer
// opens, as the node-driver, and expects the node's slices as ADDED and
// then the bookmark annotated k8s.io/initial-events-end.
func kpWatchListBookmark(t *testing.T, stored []resourcev1.ResourceSlice) {
	t.Helper()
	q := url.Values{
		"watch":                {"1"},
		"sendInitialEvents":    {"true"},
		"resourceVersionMatch": {"NotOlderThan"},
		"allowWatchBookmarks":  {"true"},
		"fieldSelector":        {"spec.driver=" + kpDriver + ",spec.nodeName=" + kpNode},
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", testSrv.URL+"/apis/resource.k8s.io/v1/resourceslices?"+q.Encode(), nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Authorization", "Bearer "+kpToken)
	res, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer res.Body.Close()
	if res.StatusCode != 200 {
		body, _ := io.ReadAll(res.Body)
		t.Fatalf("watch-list: %d %s", res.StatusCode, body)
	}
	sc := bufio.NewScanner(res.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	var added []string
	for sc.Scan() {
		var ev struct {
			Type   string `json:"type"`
			Object struct {
				Kind     string            `json:"kind"`
				Metadata metav1.ObjectMeta `json:"metadata"`
			} `json:"object"`
		}
		if err := json.Unmarshal(sc.Bytes(), &ev); err != nil {
			t.Fatalf("watch event %s: %v", sc.Bytes(), err)
		}
		switch ev.Type {
		case "ADDED":
			added = append(added, ev.Object.Metadata.Name)
		case "BOOKMARK":
			if ev.Object.Metadata.Annotations[metav1.InitialEventsAnnotationKey] != "true" || ev.Object.Metadata.ResourceVersion == "" {
				t.Fatalf("bookmark %s", sc.Bytes())
			}
			sort.Strings(added)
			var want []string
			for _, s := range stored {
				want = append(want, s.Name)
			}
			if strings.Join(added, ",") != strings.Join(want, ",") {
				t.Fatalf("initial events %v, want %v", added, want)
			}
			return
		default:
			t.Fatalf("unexpected watch event %s", sc.Bytes())
		}
	}
	t.Fatalf("watch-list ended without the initial-events-end bookmark (after %v): %v", added, sc.Err())
}

// A node-driver's controller for another node's pool goes nowhere: the
// informer may not list and watch node-2's slices, and with the pool
// published by node selector (ReconcilePoolWithName, nodeName empty, which
// the selector rule lets it list) the Node lookup and the create are
// refused with 403 into the ErrorHandler. Nothing is created.
func TestKubeletPluginSliceControllerRefusals(t *testing.T) {
	t.Parallel()
	otherUID := kpNodeUID(t, kpOther)
	kpNodeUID(t, kpNode)
	pool := &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{kpOther: {
		NodeSelector: &kcorev1.NodeSelector{NodeSelectorTerms: []kcorev1.NodeSelectorTerm{{MatchFields: []kcorev1.NodeSelectorRequirement{
			{Key: "metadata.name", Operator: kcorev1.NodeSelectorOpIn, Values: []string{kpOther}}}}}},
		Slices: []resourceslice.Slice{{Devices: []resourcev1.Device{{Name: "gpu-0"}}}},
	}}}
	nothingStored := func(t *testing.T) {
		t.Helper()
		sel := fields.Set{resourcev1.ResourceSliceSelectorDriver: kpDriver, resourcev1.ResourceSliceSelectorPoolName: kpOther}.String()
		list, err := v1Client(t, "admin", false).ResourceSlices().List(context.Background(), metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		if len(list.Items) > 0 {
			t.Fatalf("slices of %s were created: %+v", kpOther, list.Items)
		}
	}

	t.Run("node-local pool of another node", func(t *testing.T) {
		cs, rec := kpClientset(t, kpToken, contentDefault)
		ctx, cancel := context.WithTimeout(context.Background(), 1200*time.Millisecond)
		defer cancel()
		errs := &errorCollector{}
		ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
			DriverName: kpDriver, KubeClient: cs, Resources: pool, ErrorHandler: errs.handle,
			Owner:     &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: kpOther, UID: otherUID},
			SyncDelay: ptr.To(50 * time.Millisecond),
		})
		if err == nil {
			ctrl.Stop()
			t.Fatal("the controller started: its informer synced on slices it may not list")
		}
		calls := rec.matching(func(apiCall) bool { return true })
		if len(calls) == 0 {
			t.Fatal("no requests")
		}
		for _, c := range calls {
			if c.method != "GET" || !strings.HasSuffix(c.path, "/resource.k8s.io/v1/resourceslices") || c.code != 403 {
				t.Errorf("request %v: want only refused (403) lists and watches of v1 resourceslices", c)
			}
		}
		nothingStored(t)
	})

	for _, tc := range []struct {
		name string
		uid  types.UID
		want string
	}{
		{"node lookup refused", "", "may only get its own Node"},
		{"create refused", otherUID, "create resource slice"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			cs, _ := kpClientset(t, kpToken, contentDefault)
			ctx, cancel := context.WithCancel(context.Background())
			defer cancel()
			errs := &errorCollector{}
			ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
				DriverName: kpDriver, KubeClient: cs, Resources: pool, ErrorHandler: errs.handle,
				Owner:                 &resourceslice.Owner{APIVersion: "v1", Kind: "Node", Name: kpOther, UID: tc.uid},
				ReconcilePoolWithName: kpOther,
				SyncDelay:             ptr.To(50 * time.Millisecond),
			})
			if err != nil {
				t.Fatalf("start: %v", err)
			}
			eventually(t, 5*time.Second, "a refusal reaches the ErrorHandler", func() (bool, string) {
				return len(errs.get()) > 0, "no errors"
			})
			ctrl.Stop()
			for _, err := range errs.get() {
				if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), tc.want) {
					t.Errorf("error %v: want a 403 containing %q", err, tc.want)
				}
			}
			if s := ctrl.GetStats(); s.NumCreates != 0 {
				t.Errorf("stats %+v", s)
			}
			nothingStored(t)
		})
	}
}

// The library's claim client as the node-driver: a claim of a pod on its
// node is read through v1; a missing claim is a 404 after the v1 → v1beta2
// → v1beta1 cycle (every other version answers 404 too), and the client
// stays on v1; a claim it does not serve (here: not allocated) is a 403
// that stops the cycle. Status goes through UpdateStatus and through the
// plain clientset's server-side ApplyStatus.
func TestKubeletPluginClaimClient(t *testing.T) {
	t.Parallel()
	ctx := context.Background()
	ns := newNamespace(t)
	kpNodeUID(t, kpNode)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("served")), 201)
	expect(t, admin(t, "POST", path1(ns, "resourceclaims"), v1Claim("elsewhere")), 201)
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods", makePod("p1").claim("served").obj()), 201)
	bc := corev1.BindingResourceClaim{Name: "served", Allocation: &runtime.RawExtension{Raw: mustJSON(t, v1Alloc(kpNode, "gpu-0"))}}
	expect(t, admin(t, "POST", "/api/v1/namespaces/"+ns+"/pods/p1/binding", bindingWith(t, kpNode, currentRev(t), bc)), 201)

	for _, mode := range []contentMode{contentJSON, contentDefault} {
		t.Run(string(mode), func(t *testing.T) {
			cs, rec := kpClientset(t, kpToken, mode)
			c := draclient.New(cs)
			claims := c.ResourceClaims(ns)

			got, err := claims.Get(ctx, "served", metav1.GetOptions{})
			if err != nil || got.Status.Allocation == nil || got.Status.Allocation.Devices.Results[0].Driver != kpDriver ||
				len(got.Status.ReservedFor) != 1 || got.UID == "" {
				t.Fatalf("get served claim: %v %+v", err, got)
			}

			rec.reset()
			_, err = claims.Get(ctx, "gone", metav1.GetOptions{})
			if !apierrors.IsNotFound(err) {
				t.Fatalf("get missing claim: %v, want NotFound", err)
			}
			var paths []string
			for _, call := range rec.matching(func(apiCall) bool { return true }) {
				if call.code != 404 {
					t.Errorf("%v: want 404", call)
				}
				paths = append(paths, strings.Split(call.path, "/")[3])
			}
			if strings.Join(paths, ",") != "v1,v1beta2,v1beta1" || c.CurrentAPI() != "V1" {
				t.Fatalf("versions tried %v, client on %s; want v1,v1beta2,v1beta1 and back on V1", paths, c.CurrentAPI())
			}

			rec.reset()
			if _, err := claims.Get(ctx, "elsewhere", metav1.GetOptions{}); !apierrors.IsForbidden(err) {
				t.Fatalf("get claim the node-driver does not serve: %v, want 403", err)
			}
			if calls := rec.matching(func(apiCall) bool { return true }); len(calls) != 1 || c.CurrentAPI() != "V1" {
				t.Fatalf("a 403 went round the versions: %v", calls)
			}

			// The status write upstream drivers make through the library.
			got.Status.Devices = []resourcev1.AllocatedDeviceStatus{{Driver: kpDriver, Pool: kpNode, Device: "gpu-0",
				Conditions: []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Prepared", LastTransitionTime: metav1.Now()}},
				Data:       &runtime.RawExtension{Raw: []byte(`{"mode":"` + string(mode) + `"}`)}}}
			upd, err := claims.UpdateStatus(ctx, got, metav1.UpdateOptions{})
			if err != nil || len(upd.Status.Devices) != 1 || upd.Status.Devices[0].Conditions[0].Reason != "Prepared" {
				t.Fatalf("update status: %v %+v", err, upd)
			}

			// Server-side apply of the status through the plain
			// clientset, as drivers write it (dranet: ApplyStatus with
			// Force); the library's own ApplyStatus is not implemented
			// at all.
			ac := resourcev1ac.ResourceClaim("served", ns).WithStatus(resourcev1ac.ResourceClaimStatus().WithDevices(
				resourcev1ac.AllocatedDeviceStatus().WithDriver(kpDriver).WithPool(kpNode).WithDevice("gpu-0")))
			applied, err := cs.ResourceV1().ResourceClaims(ns).ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: kpDriver, Force: true})
			if err != nil || len(applied.Status.Devices) != 1 || applied.Status.Allocation == nil {
				t.Fatalf("apply status: %v %+v", err, applied)
			}
			if _, err := claims.ApplyStatus(ctx, ac, metav1.ApplyOptions{FieldManager: kpDriver}); !errors.Is(err, draclient.ErrNotImplemented) {
				t.Fatalf("draclient apply status: %v", err)
			}
		})
	}
}

// A pool that is not per node (ReconcilePoolWithName) as the cluster-wide
// driver credential: the informer lists with spec.pool.name and an empty
// spec.nodeName, which the server evaluates (no 400, so no client-side
// filtering), and the slice is published for all nodes and deleted again.
func TestKubeletPluginSliceControllerPoolWithName(t *testing.T) {
	t.Parallel()
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	pool := fmt.Sprintf("kp-shared-%d", time.Now().UnixNano())
	cs, rec := kpClientset(t, "driver", contentDefault)
	errs := &errorCollector{}
	ctrl, err := resourceslice.StartController(ctx, resourceslice.Options{
		DriverName: kpDriver, KubeClient: cs, ErrorHandler: errs.handle, ReconcilePoolWithName: pool,
		Resources: &resourceslice.DriverResources{Pools: map[string]resourceslice.Pool{pool: {AllNodes: true,
			Slices: []resourceslice.Slice{{Devices: []resourcev1.Device{{Name: "nic-0",
				Attributes: map[resourcev1.QualifiedName]resourcev1.DeviceAttribute{"speed": {StringValue: ptr.To("400G")}}}}}}}}},
		SyncDelay: ptr.To(50 * time.Millisecond),
	})
	if err != nil {
		t.Fatalf("start: %v", err)
	}
	defer ctrl.Stop()
	sel := fields.Set{resourcev1.ResourceSliceSelectorDriver: kpDriver, resourcev1.ResourceSliceSelectorPoolName: pool}.String()
	list := func() []resourcev1.ResourceSlice {
		l, err := v1Client(t, "admin", false).ResourceSlices().List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			t.Fatal(err)
		}
		return l.Items
	}
	eventually(t, 5*time.Second, "the pool's slice is published", func() (bool, string) {
		items := list()
		return len(items) == 1 && ptr.Deref(items[0].Spec.AllNodes, false) && items[0].Spec.NodeName == nil &&
			strings.HasPrefix(items[0].Name, "00000-"+kpDriver+"-"), fmt.Sprintf("%+v; errors %v", items, errs.get())
	})
	want := fields.Set{"spec.driver": kpDriver, "spec.nodeName": "", "spec.pool.name": pool}.String()
	for _, c := range rec.matching(func(c apiCall) bool { return c.method == "GET" && strings.HasSuffix(c.path, "/resourceslices") }) {
		if c.code != 200 || c.query.Get("fieldSelector") != want {
			t.Errorf("slice list or watch %v: want 200 with fieldSelector %s", c, want)
		}
	}
	ctrl.Update(nil)
	eventually(t, 5*time.Second, "the pool's slice is deleted", func() (bool, string) {
		items := list()
		return len(items) == 0, fmt.Sprintf("%d slices; errors %v", len(items), errs.get())
	})
	if e := errs.get(); len(e) > 0 {
		t.Fatalf("the controller reported errors: %v", e)
	}
}
