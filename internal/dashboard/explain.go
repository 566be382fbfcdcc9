package dashboard

import (
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/client-go/rest"

	corev1 "allot.dev/allot/api/core/v1"
	"allot.dev/allot/internal/scheduler"
	"allot.dev/allot/internal/scheduler/framework"
	"allot.dev/allot/internal/scheduler/plugins"
	"allot.dev/allot/pkg/client"
)

// ExplainResponse is the answer of ExplainPath.
type ExplainResponse struct {
	// Pods are the explained pods, by namespace and name.
	Pods []PodExplanation `json:"pods"`
	// Truncated says that more pods were pending than one request
	// explains (Options.MaxExplained).
	Truncated bool `json:"truncated,omitempty"`
}

// PodExplanation is `allot explain pod` for one pod.
type PodExplanation struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	// Node is the pod's node; empty while it is pending. A bound pod is
	// judged as if pending, without its own requests.
	Node string `json:"node,omitempty"`
	// Verdict is the outcome's code (Success, Unschedulable,
	// UnschedulableAndUnresolvable, Wait, Error) and Message the
	// scheduler's summary ("0/2 nodes are available: ...").
	Verdict string `json:"verdict"`
	Message string `json:"message"`
	// Selected is the node the scheduler would choose now, if any.
	Selected string `json:"selected,omitempty"`
	// PreFilter is set when a plugin stopped the pod before any node was
	// looked at; Nodes is then empty.
	PreFilter *Rejection `json:"preFilter,omitempty"`
	// Nodes has one entry per node, in name order.
	Nodes []NodeVerdict `json:"nodes"`
	// Devices are the devices allocated to the pod's resource.k8s.io/v1
	// claims with what their drivers report (status.devices), as `allot
	// explain` prints them; left out when the caller may not list claims.
	Devices []scheduler.DeviceReport `json:"devices,omitempty"`
}

// NodeVerdict is what explaining found about one node.
type NodeVerdict struct {
	Node     string `json:"node"`
	Feasible bool   `json:"feasible"`
	// Score is the weighted total of a feasible node.
	Score      int64       `json:"score,omitempty"`
	Rejections []Rejection `json:"rejections,omitempty"`
}

// Rejection is one plugin's "no".
type Rejection struct {
	Plugin string `json:"plugin"`
	Code   string `json:"code"`
	// Reasons are the short phrases counted across nodes; Message adds
	// the node-specific detail.
	Reasons []string `json:"reasons,omitempty"`
	Message string   `json:"message"`
}

// explainer serves ExplainPath:
//
//	GET ExplainPath?namespace=NS&name=NAME  one pod, pending or not
//	GET ExplainPath[?namespace=NS]          every pending pod (of NS)
type explainer struct {
	opts Options
}

func (e *explainer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if r.Method != http.MethodGet && r.Method != http.MethodHead {
		w.Header().Set("Allow", "GET, HEAD")
		writeStatus(w, apierrors.NewMethodNotSupported(podsResource, r.Method))
		return
	}
	token, ok := bearerToken(r)
	if !ok {
		writeStatus(w, apierrors.NewUnauthorized("a valid bearer token is required"))
		return
	}
	namespace, name, err := explainQuery(r)
	if err != nil {
		writeStatus(w, apierrors.NewBadRequest(err.Error()))
		return
	}
	c, err := client.NewForConfig(e.callerConfig(token))
	if err != nil {
		writeStatus(w, apierrors.NewInternalError(err))
		return
	}
	resp, err := e.explain(r.Context(), c, namespace, name)
	if err != nil {
		if !apierrors.IsUnauthorized(err) && !apierrors.IsForbidden(err) && !apierrors.IsNotFound(err) {
			e.opts.Logger.Warn("explain pending pods", "namespace", namespace, "name", name, "err", err)
		}
		writeStatus(w, err)
		return
	}
	writeJSON(w, http.StatusOK, resp)
}

// callerConfig is the API server's address with the caller's token and
// nothing else of the configured identity.
func (e *explainer) callerConfig(token string) *rest.Config {
	rc := rest.AnonymousClientConfig(e.opts.API)
	rc.BearerToken = token
	rc.UserAgent = "allot-dashboard"
	return rc
}

func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	token = strings.TrimSpace(token)
	return token, ok && strings.EqualFold(scheme, "Bearer") && token != ""
}

// explainQuery checks the query: namespace and name are optional, name
// needs a namespace, and nothing else is accepted.
func explainQuery(r *http.Request) (namespace, name string, err error) {
	q := r.URL.Query()
	for k, v := range q {
		if k != "namespace" && k != "name" {
			return "", "", fmt.Errorf("unknown query parameter %q: want namespace and name", k)
		}
		if len(v) > 1 {
			return "", "", fmt.Errorf("query parameter %q is given %d times", k, len(v))
		}
	}
	namespace, name = q.Get("namespace"), q.Get("name")
	if namespace != "" {
		if errs := validation.IsDNS1123Label(namespace); len(errs) > 0 {
			return "", "", fmt.Errorf("namespace %q: %s", namespace, strings.Join(errs, "; "))
		}
	}
	if name != "" {
		if namespace == "" {
			return "", "", fmt.Errorf("name %q needs a namespace", name)
		}
		if errs := validation.IsDNS1123Subdomain(name); len(errs) > 0 {
			return "", "", fmt.Errorf("name %q: %s", name, strings.Join(errs, "; "))
		}
	}
	return namespace, name, nil
}

// explain lists the cluster once and diagnoses the named pod, or every
// pending pod.
func (e *explainer) explain(ctx context.Context, c *client.Client, namespace, name string) (*ExplainResponse, error) {
	timeout := e.opts.Timeout
	resp := &ExplainResponse{Pods: []PodExplanation{}}
	var pods []*corev1.Pod
	lctx, cancel := context.WithTimeout(ctx, timeout)
	if name != "" {
		pod, err := c.Pods(namespace).Get(lctx, name)
		cancel()
		if err != nil {
			return nil, err
		}
		pods = append(pods, pod)
	} else {
		list, err := c.Pods(namespace).List(lctx, metav1.ListOptions{FieldSelector: "spec.nodeName="})
		cancel()
		if err != nil {
			return nil, err
		}
		pods, resp.Truncated = pendingPods(list.Items, e.opts.MaxExplained)
	}
	snap, err := scheduler.ListSnapshot(ctx, c, timeout)
	if err != nil {
		return nil, err
	}
	fw, err := plugins.NewDefaultFramework(plugins.Options{ScoreStrategy: e.opts.ScoreStrategy})
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	claims := e.claimsOf(ctx, c, namespace, pods)
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	for _, pod := range pods {
		d := scheduler.Explain(dctx, fw, snap, pod)
		pe := explanation(pod, d)
		pe.Devices = scheduler.PodDevicesOf(pod, claims)
		resp.Pods = append(resp.Pods, pe)
	}
	return resp, nil
}

// claimsOf lists the resource.k8s.io/v1 claims of namespace (all when
// empty) once, when some pod uses claims, by namespace and name. A caller
// who may not list them gets explanations without devices.
func (e *explainer) claimsOf(ctx context.Context, c *client.Client, namespace string, pods []*corev1.Pod) map[string]*resourcev1.ResourceClaim {
	if !slices.ContainsFunc(pods, (*corev1.Pod).UsesResourceClaims) {
		return nil
	}
	lctx, cancel := context.WithTimeout(ctx, e.opts.Timeout)
	defer cancel()
	list, err := c.ResourceClaimsV1(namespace).List(lctx, metav1.ListOptions{})
	if err != nil {
		if !apierrors.IsForbidden(err) {
			e.opts.Logger.Warn("explain: list resource claims for their devices", "namespace", namespace, "err", err)
		}
		return nil
	}
	out := make(map[string]*resourcev1.ResourceClaim, len(list.Items))
	for i := range list.Items {
		cl := &list.Items[i]
		out[cl.Namespace+"/"+cl.Name] = cl
	}
	return out
}

// pendingPods returns the pods of a list of unbound pods that wait for a
// node, by namespace and name, at most max of them.
func pendingPods(items []corev1.Pod, max int) ([]*corev1.Pod, bool) {
	var out []*corev1.Pod
	for i := range items {
		if p := &items[i]; p.DeletionTimestamp == nil && !terminal(p) {
			out = append(out, p)
		}
	}
	slices.SortFunc(out, func(a, b *corev1.Pod) int {
		return cmp.Or(strings.Compare(a.Namespace, b.Namespace), strings.Compare(a.Name, b.Name))
	})
	if len(out) > max {
		return out[:max], true
	}
	return out, false
}

func terminal(p *corev1.Pod) bool {
	return p.Status.Phase == corev1.PodSucceeded || p.Status.Phase == corev1.PodFailed
}

func explanation(pod *corev1.Pod, d *framework.Diagnosis) PodExplanation {
	pe := PodExplanation{
		Namespace: pod.Namespace, Name: pod.Name, Node: pod.Spec.NodeName,
		Verdict: d.Status.Code().String(), Selected: d.Selected, Nodes: []NodeVerdict{},
	}
	if d.Status.IsSuccess() {
		pe.Message = fmt.Sprintf("fits %d of %d nodes; the scheduler would choose %s", len(d.Feasible()), d.NumNodes, d.Selected)
	} else {
		pe.Message = d.Message()
	}
	if d.PreFilter != nil {
		r := rejection(d.PreFilter)
		pe.PreFilter = &r
	}
	for _, nr := range d.Nodes {
		nv := NodeVerdict{Node: nr.Node, Feasible: nr.Feasible(), Score: nr.Score}
		for _, st := range nr.Rejections {
			nv.Rejections = append(nv.Rejections, rejection(st))
		}
		pe.Nodes = append(pe.Nodes, nv)
	}
	return pe
}

func rejection(st *framework.Status) Rejection {
	return Rejection{Plugin: st.Plugin(), Code: st.Code().String(), Reasons: st.Reasons(), Message: st.Message()}
}

var podsResource = corev1.SchemeGroupVersion.WithResource("pods").GroupResource()

// writeStatus answers with err as a metav1.Status, as the API server
// does; errors of the API calls keep their code (401, 403, 404).
func writeStatus(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	if !errors.As(err, &se) {
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(st.Code), &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "encode answer: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(data)+1))
	w.WriteHeader(code)
	_, _ = w.Write(append(data, '\n'))
}
