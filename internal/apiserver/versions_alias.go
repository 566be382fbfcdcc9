package apiserver

import (
	"bytes"
	"io"
	"net/http"
	"regexp"
	"slices"
	"strconv"
	"strings"

	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// Same-schema versions. DeviceTaintRule is served as resource.k8s.io/v1
// and also as v1beta2 and v1alpha3, whose schema in k8s.io/api is the
// same field for field (drivers written for Kubernetes 1.35 and 1.36
// create rules there). There is one stored form, v1: a request through
// another version is the same request through v1 with the apiVersion of
// its body converted to v1 on the way in and every object's apiVersion
// converted back on the way out. Because the schemas are identical the
// conversion is exactly that, both ways and lossless, so every verb
// (get, list, watch, create, update, patch and server-side apply,
// delete, the status subresource) works in every version, and validation,
// admission, authorization and the field managers are v1's.
//
// This is not the view model of versions.go (claims and templates, whose
// versions differ in schema): there a write through the other version
// may change only metadata.

// aliasVersion serves resource of Group through Alias by way of Version;
// newObj makes the alias version's type (k8s.io/api's), for the OpenAPI
// documents.
type aliasVersion struct {
	Group, Resource string
	Alias, Version  string
	newObj          func() runtime.Object
}

var aliasVersions = []aliasVersion{
	{Group: "resource.k8s.io", Resource: "devicetaintrules", Alias: "v1beta2", Version: "v1",
		newObj: func() runtime.Object { return &resourcev1beta2.DeviceTaintRule{} }},
	{Group: "resource.k8s.io", Resource: "devicetaintrules", Alias: "v1alpha3", Version: "v1",
		newObj: func() runtime.Object { return &resourcev1alpha3.DeviceTaintRule{} }},
}

// aliasKinds describes the kinds an alias group version serves (every
// alias version when gv is empty), for discovery's and OpenAPI's eyes
// only: requests never reach them (serveAlias sends them to the stored
// version's kind).
func (s *Server) aliasKinds(gv schema.GroupVersion) []*kind {
	var out []*kind
	for _, a := range aliasVersions {
		if !gv.Empty() && (a.Group != gv.Group || a.Alias != gv.Version) {
			continue
		}
		k := s.reg.get(schema.GroupVersionResource{Group: a.Group, Version: a.Version, Resource: a.Resource})
		if k == nil {
			continue
		}
		out = append(out, &kind{gvk: schema.GroupVersionKind{Group: a.Group, Version: a.Alias, Kind: k.gvk.Kind},
			resource: k.resource, singular: k.singular, shortNames: k.shortNames, categories: k.categories,
			namespaced: k.namespaced, hasStatus: k.hasStatus, newObj: a.newObj})
	}
	return out
}

// aliasGroupVersions lists the alias group versions served.
func (s *Server) aliasGroupVersions() []schema.GroupVersion {
	var out []schema.GroupVersion
	for _, k := range s.aliasKinds(schema.GroupVersion{}) {
		if gv := k.gvk.GroupVersion(); !slices.Contains(out, gv) {
			out = append(out, gv)
		}
	}
	return out
}

func aliasFor(group, ver, resource string) *aliasVersion {
	for i, a := range aliasVersions {
		if a.Group == group && a.Alias == ver && a.Resource == resource {
			return &aliasVersions[i]
		}
	}
	return nil
}

// serveAlias serves a request through an alias version by way of its
// stored version; false when the request is for no alias.
func (s *Server) serveAlias(w http.ResponseWriter, r *http.Request) bool {
	ri := parseRequest(r)
	if !ri.isResource {
		return false
	}
	a := aliasFor(ri.group, ri.version, ri.resource)
	if a == nil {
		return false
	}
	from, to := a.Group+"/"+a.Alias, a.Group+"/"+a.Version
	r2 := r.Clone(r.Context())
	prefix := "/apis/" + from + "/"
	r2.URL.Path = "/apis/" + to + "/" + strings.TrimPrefix(r.URL.Path, prefix)
	r2.URL.RawPath = ""
	r2.RequestURI = r2.URL.RequestURI()
	// Answers are JSON (allot answers nothing else); a client asking for
	// protobuf accepts JSON too.
	if acc := r2.Header.Get("Accept"); strings.Contains(acc, protobufType) {
		r2.Header.Set("Accept", strings.ReplaceAll(acc, protobufType, "application/json"))
	}
	if r.Body != nil && r.Method != http.MethodGet && r.Method != http.MethodHead {
		body, err := s.readBody(w, r)
		if err != nil {
			writeError(w, err)
			return true
		}
		if isProtobuf(r) {
			if body, err = protobufToJSON(body); err != nil {
				writeError(w, err)
				return true
			}
			r2.Header.Set("Content-Type", "application/json")
		}
		body = convertAPIVersion(body, from, to)
		r2.Body = io.NopCloser(bytes.NewReader(body))
		r2.ContentLength = int64(len(body))
		r2.Header.Set("Content-Length", strconv.Itoa(len(body)))
	}
	vw := &versionWriter{w: w, from: []byte(`"apiVersion":"` + to + `"`), to: []byte(`"apiVersion":"` + from + `"`)}
	s.serveAPI(vw, r2)
	vw.finish()
	return true
}

// apiVersionJSON and apiVersionYAML find an apiVersion field of a JSON
// body and of a YAML one (server-side apply sends YAML).
var (
	apiVersionJSON = regexp.MustCompile(`("apiVersion"\s*:\s*)"([^"\\]*)"`)
	apiVersionYAML = regexp.MustCompile(`(?m)^(\s*(?:-\s+)?["']?apiVersion["']?\s*:\s*)(["']?)([^"'\s#]+)(["']?)`)
)

// convertAPIVersion rewrites the apiVersion fields of a body that name
// from to name to: the object's, and those of its managedFields.
func convertAPIVersion(body []byte, from, to string) []byte {
	body = apiVersionJSON.ReplaceAllFunc(body, func(m []byte) []byte {
		sub := apiVersionJSON.FindSubmatch(m)
		if string(sub[2]) != from {
			return m
		}
		return append(append(append([]byte{}, sub[1]...), '"'), append([]byte(to), '"')...)
	})
	return apiVersionYAML.ReplaceAllFunc(body, func(m []byte) []byte {
		sub := apiVersionYAML.FindSubmatch(m)
		if string(sub[3]) != from {
			return m
		}
		return slices.Concat(sub[1], sub[2], []byte(to), sub[4])
	})
}

// versionWriter converts the apiVersion of every object in an answer
// from the stored version to the alias. It holds back the end of each
// write that could begin a match continued by the next write, and writes
// it before each flush and at the end.
type versionWriter struct {
	w        http.ResponseWriter
	from, to []byte
	tail     []byte
}

func (v *versionWriter) Header() http.Header { return v.w.Header() }

func (v *versionWriter) WriteHeader(code int) {
	v.w.Header().Del("Content-Length")
	v.w.WriteHeader(code)
}

func (v *versionWriter) Write(p []byte) (int, error) {
	buf := append(v.tail, p...)
	// Hold back the longest end of buf that begins a match, after the
	// last whole match (whose own end may look like a beginning).
	after := 0
	if i := bytes.LastIndex(buf, v.from); i >= 0 {
		after = i + len(v.from)
	}
	keep := 0
	for n := min(len(v.from)-1, len(buf)-after); n > 0; n-- {
		if bytes.HasSuffix(buf, v.from[:n]) {
			keep = n
			break
		}
	}
	out := bytes.ReplaceAll(buf[:len(buf)-keep], v.from, v.to)
	v.tail = append([]byte(nil), buf[len(buf)-keep:]...)
	if _, err := v.w.Write(out); err != nil {
		return 0, err
	}
	return len(p), nil
}

func (v *versionWriter) finish() {
	if len(v.tail) > 0 {
		_, _ = v.w.Write(v.tail)
		v.tail = nil
	}
}

func (v *versionWriter) Flush() {
	v.finish()
	if f, ok := v.w.(http.Flusher); ok {
		f.Flush()
	}
}

// aliasResources lists the resources an alias group version serves.
func (s *Server) aliasResources(gv schema.GroupVersion) []metav1.APIResource {
	var out []metav1.APIResource
	for _, k := range s.aliasKinds(gv) {
		out = append(out, metav1.APIResource{Name: k.resource, SingularName: k.singular, Namespaced: k.namespaced, Kind: k.gvk.Kind,
			Verbs: allVerbs, ShortNames: k.shortNames, Categories: k.categories})
		if k.hasStatus {
			out = append(out, metav1.APIResource{Name: k.resource + "/status", Namespaced: k.namespaced, Kind: k.gvk.Kind, Verbs: subVerbs})
		}
	}
	return out
}

// withAliasVersions adds the alias versions to the groups that serve
// their stored versions, each group's versions in Kubernetes' order
// (GA, beta, alpha; newer first), the preferred version kept.
func withAliasVersions(groups []metav1.APIGroup) []metav1.APIGroup {
	for i := range groups {
		g := &groups[i]
		for _, a := range aliasVersions {
			if a.Group != g.Name || !slices.ContainsFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == a.Version }) ||
				slices.ContainsFunc(g.Versions, func(v metav1.GroupVersionForDiscovery) bool { return v.Version == a.Alias }) {
				continue
			}
			g.Versions = append(g.Versions, metav1.GroupVersionForDiscovery{GroupVersion: a.Group + "/" + a.Alias, Version: a.Alias})
		}
		slices.SortStableFunc(g.Versions, func(a, b metav1.GroupVersionForDiscovery) int {
			return -version.CompareKubeAwareVersionStrings(a.Version, b.Version)
		})
	}
	return groups
}
