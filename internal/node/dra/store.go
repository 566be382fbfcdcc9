package dra

import (
	"encoding/json"
	"slices"
	"sort"
	"sync"

	"k8s.io/apimachinery/pkg/types"

	drapb "allot.dev/allot/api/dra/v1alpha1"
	"allot.dev/allot/api/resource/resourceconv"
	"allot.dev/allot/internal/fence"
)

// podRef names a pod that uses a prepared claim; its namespace is the
// claim's.
type podRef struct {
	UID  types.UID `json:"uid"`
	Name string    `json:"name"`
}

// handleRecord is one driver's part of a prepared claim: what was sent
// (sent again to unprepare, even if the claim is gone from the API) and
// what the driver answered.
type handleRecord struct {
	Driver     string          `json:"driver"`
	Data       string          `json:"data,omitempty"`
	Structured json.RawMessage `json:"structured,omitempty"`
	// Kubelet is set when the driver spoke the kubelet's DRA API when the
	// claim was recorded: it was sent the claim's reference only, and
	// answered Devices. Data and Structured are then empty.
	Kubelet bool `json:"kubelet,omitempty"`
	// Prepared is set once the driver answered success; CDIDevices is an
	// allot driver's answer, Devices a kubelet driver's.
	Prepared   bool           `json:"prepared,omitempty"`
	CDIDevices []string       `json:"cdiDevices,omitempty"`
	Devices    []deviceRecord `json:"devices,omitempty"`
}

// deviceRecord is one device a kubelet driver prepared for a claim: the
// requests it serves (empty: all of the claim's), where it is, and its
// CDI devices.
type deviceRecord struct {
	Requests   []string `json:"requests,omitempty"`
	Pool       string   `json:"pool"`
	Device     string   `json:"device"`
	CDIDevices []string `json:"cdiDevices,omitempty"`
	ShareID    *string  `json:"shareID,omitempty"`
}

func (d deviceRecord) clone() deviceRecord {
	d.Requests = slices.Clone(d.Requests)
	d.CDIDevices = slices.Clone(d.CDIDevices)
	if d.ShareID != nil {
		id := *d.ShareID
		d.ShareID = &id
	}
	return d
}

func cloneDevices(in []deviceRecord) []deviceRecord {
	if in == nil {
		return nil
	}
	out := make([]deviceRecord, len(in))
	for i, d := range in {
		out[i] = d.clone()
	}
	return out
}

// claimRecord is a claim the Manager asked drivers to prepare, and the
// pods of this node that use it. It is removed once unprepared.
type claimRecord struct {
	UID       types.UID `json:"uid"`
	Namespace string    `json:"namespace"`
	Name      string    `json:"name"`
	// Version is the apiVersion the claim is stored as
	// ("resource.k8s.io/v1alpha2" or "resource.k8s.io/v1"); empty in
	// records of agents that knew only v1alpha2. The handles of a v1 claim
	// are those of its v1alpha2 form (v1Form), sent again as they are to
	// unprepare; the version says through which API to read the claim
	// again.
	Version string         `json:"version,omitempty"`
	Handles []handleRecord `json:"handles"`
	Pods    []podRef       `json:"pods"`
	// MultiNode: the allocation holds devices other nodes can reach
	// (fence.AllocationReachesOtherNodes of its v1alpha2 form), so the
	// pods using it are fenced. Records of agents before the fence lack
	// it (false).
	MultiNode bool `json:"multiNode,omitempty"`
}

func (r *claimRecord) clone() claimRecord {
	c := *r
	c.Handles = make([]handleRecord, len(r.Handles))
	for i, h := range r.Handles {
		h.Structured = slices.Clone(h.Structured)
		h.CDIDevices = slices.Clone(h.CDIDevices)
		h.Devices = cloneDevices(h.Devices)
		c.Handles[i] = h
	}
	c.Pods = slices.Clone(r.Pods)
	return c
}

func (r *claimRecord) hasPod(uid types.UID) bool {
	return slices.ContainsFunc(r.Pods, func(p podRef) bool { return p.UID == uid })
}

func (r *claimRecord) handle(driver string) *handleRecord {
	for i := range r.Handles {
		if r.Handles[i].Driver == driver {
			return &r.Handles[i]
		}
	}
	return nil
}

// prepared reports whether every driver answered success.
func (r *claimRecord) prepared() bool {
	for _, h := range r.Handles {
		if !h.Prepared {
			return false
		}
	}
	return true
}

// cdiDevices returns the CDI devices of every prepared handle that serve
// request, a request of the claim (its subrequests' devices included): all
// of an allot driver's, and a kubelet driver's devices that list request
// or no request. An empty request takes every device.
func (r *claimRecord) cdiDevices(request string) []string {
	var out []string
	for _, h := range r.Handles {
		out = append(out, h.CDIDevices...)
		for _, d := range h.Devices {
			if servesRequest(d.Requests, request) {
				out = append(out, d.CDIDevices...)
			}
		}
	}
	return out
}

// servesRequest reports whether a device prepared for requests (names of
// requests or subrequests, "main/sub") serves request; a device that
// names none serves every request.
func servesRequest(requests []string, request string) bool {
	if request == "" || len(requests) == 0 {
		return true
	}
	for _, r := range requests {
		if resourceconv.MainRequest(r) == request || r == request {
			return true
		}
	}
	return false
}

// batchItem is one claim in a batched call to one driver.
type batchItem struct {
	uid             types.UID
	namespace, name string
	h               handleRecord
}

func (b batchItem) proto() *drapb.Claim {
	return &drapb.Claim{Namespace: b.namespace, Name: b.name, Uid: string(b.uid),
		ResourceHandle: b.h.Data, StructuredResourceHandle: b.h.Structured}
}

// claimStore owns the claim records. Callers hold the claim locks of the
// claims they change; mu guards the map, writeMu orders checkpoint
// writes (each writes a snapshot taken under writeMu, so the last write
// is the newest state).
type claimStore struct {
	path    string // checkpoint; empty: memory only
	mu      sync.Mutex
	claims  map[types.UID]*claimRecord
	writeMu sync.Mutex
}

// attach records that pod uses the ready claims and returns, per driver,
// the handles not prepared yet. changed reports whether a record changed.
func (s *claimStore) attach(ns, podName string, podUID types.UID, ready []readyClaim) (pending map[string][]batchItem, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	pending = map[string][]batchItem{}
	for _, rc := range ready {
		c := rc.claim
		rec := s.claims[c.UID]
		if rec == nil {
			rec = &claimRecord{UID: c.UID, Namespace: c.Namespace, Name: c.Name, Version: rc.version,
				MultiNode: len(rc.handles) > 0 && fence.AllocationReachesOtherNodes(c.Status.Allocation)}
			s.claims[c.UID] = rec
			changed = true
		}
		for _, h := range rc.handles {
			hr := rec.handle(h.driver)
			if hr == nil {
				rec.Handles = append(rec.Handles, handleRecord{Driver: h.driver, Data: h.data, Structured: h.structured, Kubelet: h.kubelet})
				hr = &rec.Handles[len(rec.Handles)-1]
				changed = true
			}
			if !hr.Prepared {
				pending[h.driver] = append(pending[h.driver], batchItem{uid: c.UID, namespace: c.Namespace, name: c.Name, h: *hr})
			}
		}
		if !rec.hasPod(podUID) {
			rec.Pods = append(rec.Pods, podRef{UID: podUID, Name: podName})
			changed = true
		}
	}
	return pending, changed
}

// markPrepared records a driver's success for a claim.
func (s *claimStore) markPrepared(uid types.UID, driver string, cdi []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.claims[uid]; rec != nil {
		if h := rec.handle(driver); h != nil {
			h.Prepared, h.CDIDevices = true, slices.Clone(cdi)
		}
	}
}

// markPreparedDevices records a kubelet driver's success for a claim.
func (s *claimStore) markPreparedDevices(uid types.UID, driver string, devices []deviceRecord) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if rec := s.claims[uid]; rec != nil {
		if h := rec.handle(driver); h != nil {
			h.Prepared, h.Devices = true, cloneDevices(devices)
		}
	}
}

// podClaims returns the UIDs of the claims pod uses.
func (s *claimStore) podClaims(podUID types.UID) []types.UID {
	s.mu.Lock()
	defer s.mu.Unlock()
	var out []types.UID
	for uid, rec := range s.claims {
		if rec.hasPod(podUID) {
			out = append(out, uid)
		}
	}
	return out
}

// detach removes pod from those of claims (whose locks the caller holds)
// that other pods still use, and returns copies of those it is the last
// user of: they must be unprepared before their records go.
func (s *claimStore) detach(podUID types.UID, claims []types.UID) (last []claimRecord, changed bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, uid := range claims {
		rec := s.claims[uid]
		if rec == nil || !rec.hasPod(podUID) {
			continue
		}
		if len(rec.Pods) == 1 {
			last = append(last, rec.clone())
			continue
		}
		rec.Pods = slices.DeleteFunc(rec.Pods, func(p podRef) bool { return p.UID == podUID })
		changed = true
	}
	return last, changed
}

// remove drops unprepared claims.
func (s *claimStore) remove(uids []types.UID) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, uid := range uids {
		delete(s.claims, uid)
	}
}

// find returns the record of the claim ns/name that pod uses.
func (s *claimStore) find(ns, name string, podUID types.UID) (claimRecord, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range s.claims {
		if rec.Namespace == ns && rec.Name == name && rec.hasPod(podUID) {
			return rec.clone(), true
		}
	}
	return claimRecord{}, false
}

// versionOf returns the version recorded for a claim named ns/name
// (versionV1alpha2 when none is).
func (s *claimStore) versionOf(ns, name string) string {
	s.mu.Lock()
	defer s.mu.Unlock()
	for _, rec := range s.claims {
		if rec.Namespace == ns && rec.Name == name && rec.Version != "" {
			return rec.Version
		}
	}
	return versionV1alpha2
}

// podKey names a pod that uses prepared claims.
type podKey struct {
	Namespace, Name string
	UID             types.UID
}

// pods returns every pod that uses a claim, sorted.
func (s *claimStore) pods() []podKey {
	s.mu.Lock()
	defer s.mu.Unlock()
	seen := map[types.UID]bool{}
	var out []podKey
	for _, rec := range s.claims {
		for _, p := range rec.Pods {
			if !seen[p.UID] {
				seen[p.UID] = true
				out = append(out, podKey{Namespace: rec.Namespace, Name: p.Name, UID: p.UID})
			}
		}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}

func (s *claimStore) count() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.claims)
}

// snapshot returns copies of every record, sorted by UID.
func (s *claimStore) snapshot() []claimRecord {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]claimRecord, 0, len(s.claims))
	for _, rec := range s.claims {
		out = append(out, rec.clone())
	}
	sort.Slice(out, func(i, j int) bool { return out[i].UID < out[j].UID })
	return out
}
