package apiserver

import (
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// requestInfo is what a resource path names.
type requestInfo struct {
	isResource  bool
	verb        string // get, list, watch, create, update, patch, delete, deletecollection
	group       string
	version     string
	resource    string
	namespace   string
	name        string
	subresource string
	parts       []string

	// manager names the writer in metadata.managedFields (create, update,
	// patch; see managerOf); applied marks an object the field manager
	// has already merged and tracked (apply.go).
	manager string
	applied bool
}

func (ri *requestInfo) gvr() schema.GroupVersionResource {
	return schema.GroupVersionResource{Group: ri.group, Version: ri.version, Resource: ri.resource}
}

// parseRequest splits /api/v1/... and /apis/GROUP/VERSION/... paths.
// Paths that are not resource paths (discovery, health) return isResource
// false with group and version filled where present.
func parseRequest(r *http.Request) requestInfo {
	ri := requestInfo{}
	p := strings.Trim(r.URL.Path, "/")
	parts := strings.Split(p, "/")
	switch {
	case len(parts) >= 2 && parts[0] == "api":
		ri.version = parts[1]
		parts = parts[2:]
	case len(parts) >= 3 && parts[0] == "apis":
		ri.group, ri.version = parts[1], parts[2]
		parts = parts[3:]
	default:
		return ri
	}
	if len(parts) == 0 {
		return ri
	}
	ri.isResource = true
	// namespaces/NS/RESOURCE/...: a namespaced resource, unless the part
	// after the namespace name is a subresource of the namespace itself.
	if parts[0] == "namespaces" && len(parts) >= 3 && parts[2] != "status" && parts[2] != "finalize" {
		ri.namespace = parts[1]
		parts = parts[2:]
	}
	ri.resource = parts[0]
	if len(parts) >= 2 {
		ri.name = parts[1]
	}
	if len(parts) >= 3 {
		ri.subresource = parts[2]
	}
	ri.parts = parts
	ri.verb = verbOf(r, ri.name != "")
	return ri
}

func verbOf(r *http.Request, named bool) string {
	q := r.URL.Query()
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		if isTrue(q.Get("watch")) {
			return "watch"
		}
		if named {
			return "get"
		}
		return "list"
	case http.MethodPost:
		return "create"
	case http.MethodPut:
		return "update"
	case http.MethodPatch:
		return "patch"
	case http.MethodDelete:
		if named {
			return "delete"
		}
		return "deletecollection"
	}
	return strings.ToLower(r.Method)
}

func isTrue(s string) bool { return s == "true" || s == "1" }
