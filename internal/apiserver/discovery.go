package apiserver

import (
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serveDiscovery answers /api, /apis, /apis/GROUP and the resource lists of
// /api/v1 and /apis/GROUP/VERSION (the unaggregated discovery documents;
// clients that ask for aggregated discovery fall back to these).
func (s *Server) serveDiscovery(w http.ResponseWriter, r *http.Request, ri requestInfo) {
	path := r.URL.Path
	switch {
	case path == "/api" || path == "/api/":
		writeJSON(w, http.StatusOK, &metav1.APIVersions{
			TypeMeta: metav1.TypeMeta{Kind: "APIVersions"},
			Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{
				{ClientCIDR: "0.0.0.0/0", ServerAddress: r.Host},
			},
		})
	case path == "/apis" || path == "/apis/":
		writeJSON(w, http.StatusOK, &metav1.APIGroupList{
			TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"},
			Groups:   s.apiGroups(),
		})
	case ri.version != "":
		s.serveResourceList(w, schema.GroupVersion{Group: ri.group, Version: ri.version})
	default:
		group := ""
		if len(path) > len("/apis/") {
			group = trimSlashes(path[len("/apis/"):])
		}
		for _, g := range s.apiGroups() {
			if g.Name == group {
				g.TypeMeta = metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}
				writeJSON(w, http.StatusOK, &g)
				return
			}
		}
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: group}, ""))
	}
}

func trimSlashes(s string) string {
	for len(s) > 0 && s[len(s)-1] == '/' {
		s = s[:len(s)-1]
	}
	return s
}

func (s *Server) apiGroups() []metav1.APIGroup {
	var groups []metav1.APIGroup
	idx := map[string]int{}
	for _, gv := range s.reg.groupVersions() {
		if gv.Group == "" {
			continue
		}
		gvd := metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: gv.Version}
		i, ok := idx[gv.Group]
		if !ok {
			idx[gv.Group] = len(groups)
			groups = append(groups, metav1.APIGroup{Name: gv.Group, PreferredVersion: gvd})
			i = len(groups) - 1
		}
		groups[i].Versions = append(groups[i].Versions, gvd)
	}
	return withAliasVersions(groups)
}

var (
	readVerbs  = []string{"get", "list", "watch"}
	allVerbs   = []string{"create", "delete", "deletecollection", "get", "list", "patch", "update", "watch"}
	subVerbs   = []string{"get", "patch", "update"}
	createOnly = []string{"create"}
)

func (s *Server) serveResourceList(w http.ResponseWriter, gv schema.GroupVersion) {
	list := &metav1.APIResourceList{
		TypeMeta:     metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"},
		GroupVersion: gv.String(),
		APIResources: []metav1.APIResource{},
	}
	found := false
	for _, k := range s.reg.all() {
		if k.gvk.GroupVersion() != gv {
			continue
		}
		found = true
		list.APIResources = append(list.APIResources, metav1.APIResource{
			Name: k.resource, SingularName: k.singular, Namespaced: k.namespaced, Kind: k.gvk.Kind,
			Verbs: allVerbs, ShortNames: k.shortNames, Categories: k.categories,
		})
		if k.hasStatus {
			list.APIResources = append(list.APIResources, metav1.APIResource{
				Name: k.resource + "/status", Namespaced: k.namespaced, Kind: k.gvk.Kind, Verbs: subVerbs,
			})
		}
		if gv.Group == "" && k.resource == "pods" {
			list.APIResources = append(list.APIResources,
				metav1.APIResource{Name: "pods/binding", Namespaced: true, Kind: "Binding", Verbs: createOnly},
				metav1.APIResource{Name: "pods/log", Namespaced: true, Kind: "Pod", Verbs: []string{"get"}})
		}
		if gv.Group == "" && k.resource == "namespaces" {
			list.APIResources = append(list.APIResources,
				metav1.APIResource{Name: "namespaces/finalize", Kind: "Namespace", Verbs: []string{"update"}})
		}
	}
	if alias := s.aliasResources(gv); len(alias) > 0 {
		found = true
		list.APIResources = append(list.APIResources, alias...)
	}
	if !found {
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Group: gv.Group}, gv.Version))
		return
	}
	writeJSON(w, http.StatusOK, list)
}
