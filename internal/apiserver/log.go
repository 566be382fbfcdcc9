package apiserver

import (
	"crypto/tls"
	"fmt"
	"io"
	"net/http"
	"net/url"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	corev1 "allot.dev/allot/api/core/v1"
)

// serveLog proxies pods/log to the node agent of the pod's node, at
// https://NODE-ADDRESS:PORT/containerLogs/NAMESPACE/POD/CONTAINER with the
// query (follow, tailLines, previous, timestamps, limitBytes, sinceSeconds)
// passed through. NODE-ADDRESS is one of the node's serving certificate
// (nodeEndpoint), never one only written into its status.
func (s *Server) serveLog(w http.ResponseWriter, r *http.Request, k *kind, ri *requestInfo) {
	ctx := r.Context()
	if ri.verb != "get" {
		writeError(w, apierrors.NewMethodNotSupported(k.groupResource(), ri.verb))
		return
	}
	obj, err := s.getObj(ctx, k, ri.namespace, ri.name)
	if err != nil {
		writeError(w, err)
		return
	}
	pod := obj.(*corev1.Pod)
	if err := s.authorize(ctx, k, ri, "get", nil, pod); err != nil {
		writeError(w, err)
		return
	}
	container := r.URL.Query().Get("container")
	if container == "" {
		if len(pod.Spec.Containers) != 1 {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("a container name must be specified for pod %s, choose one of: %v", pod.Name, containerNames(pod))))
			return
		}
		container = pod.Spec.Containers[0].Name
	}
	if pod.Spec.NodeName == "" {
		writeError(w, apierrors.NewBadRequest(fmt.Sprintf("pod %s is not scheduled to a node yet", pod.Name)))
		return
	}
	target, tlsCfg, err := s.nodeLogURL(r, pod, container)
	if err != nil {
		writeError(w, err)
		return
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, target, nil)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	tr := nodeTransport(tlsCfg)
	defer tr.CloseIdleConnections()
	resp, err := tr.RoundTrip(req)
	if err != nil {
		writeError(w, apierrors.NewServiceUnavailable(fmt.Sprintf("reach node %s for logs: %v", pod.Spec.NodeName, err)))
		return
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		msg, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		writeError(w, apierrors.NewGenericServerResponse(resp.StatusCode, "get", k.groupResource(), pod.Name, string(msg), 0, false))
		return
	}
	w.Header().Set("Content-Type", "text/plain")
	w.WriteHeader(http.StatusOK)
	copyFlushing(w, resp.Body)
}

func (s *Server) nodeLogURL(r *http.Request, pod *corev1.Pod, container string) (string, *tls.Config, error) {
	nodeObj, err := s.getObj(r.Context(), s.reg.get(gvrOf(corev1.SchemeGroupVersion, "nodes")), "", pod.Spec.NodeName)
	if err != nil {
		return "", nil, err
	}
	hostPort, tlsCfg, err := s.nodeEndpoint(r.Context(), nodeObj.(*corev1.Node))
	if err != nil {
		return "", nil, err
	}
	u := url.URL{Scheme: "https", Host: hostPort,
		Path:     "/containerLogs/" + pod.Namespace + "/" + pod.Name + "/" + container,
		RawQuery: r.URL.RawQuery}
	return u.String(), tlsCfg, nil
}

func containerNames(pod *corev1.Pod) []string {
	var out []string
	for _, c := range pod.Spec.Containers {
		out = append(out, c.Name)
	}
	return out
}

func copyFlushing(w http.ResponseWriter, r io.Reader) {
	buf := make([]byte, 32<<10)
	f, _ := w.(http.Flusher)
	for {
		n, err := r.Read(buf)
		if n > 0 {
			if _, werr := w.Write(buf[:n]); werr != nil {
				return
			}
			if f != nil {
				f.Flush()
			}
		}
		if err != nil {
			return
		}
	}
}
