package apiserver

import (
	"fmt"

	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	openapiv2 "github.com/google/gnostic-models/openapiv2"
	"google.golang.org/protobuf/proto"
	"net/http"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// serveOpenAPI answers /openapi/v2 (one document) and /openapi/v3 (an index
// of per-group-version documents), built from the Go types and the CRD
// schemas. kubectl reads the v3 documents to learn that every kind supports
// server-side field validation (the fieldValidation query parameter of its
// PATCH operation) and to compute patches.
func (s *Server) serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	p := strings.TrimSuffix(r.URL.Path, "/")
	switch {
	case p == "/openapi/v2":
		if strings.Contains(r.Header.Get("Accept"), "application/com.github.proto-openapi.spec.v2") {
			s.serveOpenAPIv2Proto(w)
			return
		}
		writeJSON(w, http.StatusOK, s.openAPIv2())
	case p == "/openapi/v3":
		writeJSON(w, http.StatusOK, s.openAPIv3Index())
	case strings.HasPrefix(p, "/openapi/v3/"):
		gvPath := strings.TrimPrefix(p, "/openapi/v3/")
		gv, ok := parseGVPath(gvPath)
		if !ok {
			writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, gvPath))
			return
		}
		writeJSON(w, http.StatusOK, s.openAPIv3(gv))
	default:
		writeError(w, apierrors.NewNotFound(schema.GroupResource{Resource: "openapi"}, p))
	}
}

func parseGVPath(p string) (schema.GroupVersion, bool) {
	parts := strings.Split(p, "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		return schema.GroupVersion{Version: parts[1]}, true
	case len(parts) == 3 && parts[0] == "apis":
		return schema.GroupVersion{Group: parts[1], Version: parts[2]}, true
	}
	return schema.GroupVersion{}, false
}

func gvPathOf(gv schema.GroupVersion) string {
	if gv.Group == "" {
		return "api/" + gv.Version
	}
	return "apis/" + gv.Group + "/" + gv.Version
}

func (s *Server) openAPIv3Index() map[string]any {
	paths := map[string]any{}
	for _, gv := range append(s.reg.groupVersions(), s.aliasGroupVersions()...) {
		doc, _ := json.Marshal(s.openAPIv3(gv))
		sum := sha256.Sum256(doc)
		paths[gvPathOf(gv)] = map[string]string{
			"serverRelativeURL": "/openapi/v3/" + gvPathOf(gv) + "?hash=" + strings.ToUpper(hex.EncodeToString(sum[:16])),
		}
	}
	return map[string]any{"paths": paths}
}

func (s *Server) openAPIv3(gv schema.GroupVersion) map[string]any {
	b := newSchemaBuilder("#/components/schemas/")
	paths := map[string]any{}
	for _, k := range append(s.reg.all(), s.aliasKinds(gv)...) {
		if k.gvk.GroupVersion() != gv {
			continue
		}
		ref := kindSchema(b, k)
		for p, item := range kindPaths(k, ref, "v3") {
			paths[p] = item
		}
	}
	return map[string]any{
		"openapi":    "3.0.0",
		"info":       map[string]string{"title": "allot", "version": Version},
		"paths":      paths,
		"components": map[string]any{"schemas": b.defs},
	}
}

func (s *Server) openAPIv2() map[string]any {
	b := newSchemaBuilder("#/definitions/")
	paths := map[string]any{}
	for _, k := range append(s.reg.all(), s.aliasKinds(schema.GroupVersion{})...) {
		ref := kindSchema(b, k)
		for p, item := range kindPaths(k, ref, "v2") {
			paths[p] = item
		}
	}
	return map[string]any{
		"swagger":     "2.0",
		"info":        map[string]string{"title": "allot", "version": Version},
		"paths":       paths,
		"definitions": b.defs,
	}
}

// kindSchema registers the kind's schema and returns a $ref to it.
func kindSchema(b *schemaBuilder, k *kind) map[string]any {
	gvkExt := []any{map[string]string{"group": k.gvk.Group, "version": k.gvk.Version, "kind": k.gvk.Kind}}
	if k.crd != nil {
		name := crdDefName(k)
		def := map[string]any{"type": "object", "x-kubernetes-preserve-unknown-fields": true}
		if k.schema != nil {
			raw, _ := json.Marshal(k.schema)
			_ = json.Unmarshal(raw, &def)
		}
		props, _ := def["properties"].(map[string]any)
		if props == nil {
			props = map[string]any{}
			def["properties"] = props
		}
		if b.v2 {
			def = swagger2Schema(def).(map[string]any)
			props, _ = def["properties"].(map[string]any)
		}
		props["metadata"] = b.schemaOf(reflect.TypeOf(metav1.ObjectMeta{}))
		props["apiVersion"] = map[string]any{"type": "string"}
		props["kind"] = map[string]any{"type": "string"}
		def["x-kubernetes-group-version-kind"] = gvkExt
		b.defs[name] = def
		return map[string]any{"$ref": b.refPrefix + name}
	}
	t := reflect.TypeOf(k.newObj()).Elem()
	ref := b.schemaOf(t)
	b.defs[defName(t)]["x-kubernetes-group-version-kind"] = gvkExt
	return ref
}

func crdDefName(k *kind) string {
	parts := strings.Split(k.gvk.Group, ".")
	for i, j := 0, len(parts)-1; i < j; i, j = i+1, j-1 {
		parts[i], parts[j] = parts[j], parts[i]
	}
	return strings.Join(parts, ".") + "." + k.gvk.Version + "." + k.gvk.Kind
}

// serveOpenAPIv2Proto answers kubectl's request for the protobuf form of
// the v2 document (gnostic's openapi_v2.Document), which it falls back to
// for client-side validation of kinds it cannot validate on the server.
func (s *Server) serveOpenAPIv2Proto(w http.ResponseWriter) {
	data, err := json.Marshal(s.openAPIv2())
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	doc, err := openapiv2.ParseDocument(data)
	if err != nil {
		writeError(w, apierrors.NewInternalError(fmt.Errorf("convert OpenAPI v2 to protobuf: %w", err)))
		return
	}
	pb, err := proto.Marshal(doc)
	if err != nil {
		writeError(w, apierrors.NewInternalError(err))
		return
	}
	w.Header().Set("Content-Type", "application/com.github.proto-openapi.spec.v2.v1.0+protobuf")
	w.WriteHeader(http.StatusOK)
	_, _ = w.Write(pb)
}
