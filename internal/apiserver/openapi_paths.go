package apiserver

// kindPaths describes the REST operations of a kind, in OpenAPI v2 or v3
// form. Each operation carries x-kubernetes-action and
// x-kubernetes-group-version-kind; PATCH lists the fieldValidation query
// parameter.
func kindPaths(k *kind, ref map[string]any, version string) map[string]any {
	base := "/" + gvPathOf(k.gvk.GroupVersion()) + "/"
	if k.namespaced {
		base += "namespaces/{namespace}/"
	}
	gvk := map[string]string{"group": k.gvk.Group, "version": k.gvk.Version, "kind": k.gvk.Kind}
	op := func(action, id string, params ...map[string]any) map[string]any {
		o := map[string]any{
			"operationId":                     id + k.gvk.Kind,
			"x-kubernetes-action":             action,
			"x-kubernetes-group-version-kind": gvk,
			"parameters":                      params,
			"responses":                       responses(ref, version),
		}
		if action == "post" || action == "put" || action == "patch" {
			if version == "v3" {
				o["requestBody"] = map[string]any{"content": map[string]any{"application/json": map[string]any{"schema": ref}}}
			} else {
				o["parameters"] = append(params, map[string]any{"name": "body", "in": "body", "required": true, "schema": ref})
			}
		}
		return o
	}
	q := func(name string) map[string]any { return queryParam(name, version) }
	writeParams := []map[string]any{q("dryRun"), q("fieldManager"), q("fieldValidation")}
	item := map[string]any{
		"get":    op("get", "read"),
		"put":    op("put", "replace", writeParams...),
		"patch":  op("patch", "patch", append(writeParams, q("force"))...),
		"delete": op("delete", "delete", q("gracePeriodSeconds"), q("propagationPolicy"), q("dryRun")),
	}
	coll := map[string]any{
		"get":  op("list", "list", q("labelSelector"), q("fieldSelector"), q("limit"), q("continue"), q("resourceVersion"), q("watch")),
		"post": op("post", "create", writeParams...),
	}
	paths := map[string]any{base + k.resource: coll, base + k.resource + "/{name}": item}
	if k.hasStatus {
		paths[base+k.resource+"/{name}/status"] = map[string]any{
			"get": op("get", "readStatus"), "put": op("put", "replaceStatus", writeParams...),
			"patch": op("patch", "patchStatus", writeParams...),
		}
	}
	return paths
}

func queryParam(name, version string) map[string]any {
	p := map[string]any{"name": name, "in": "query", "uniqueItems": true}
	if version == "v3" {
		p["schema"] = map[string]any{"type": "string"}
	} else {
		p["type"] = "string"
	}
	return p
}

func responses(ref map[string]any, version string) map[string]any {
	if version == "v3" {
		return map[string]any{"200": map[string]any{"description": "OK",
			"content": map[string]any{"application/json": map[string]any{"schema": ref}}}}
	}
	return map[string]any{"200": map[string]any{"description": "OK", "schema": ref}}
}
