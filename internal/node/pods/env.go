package pods

import (
	"fmt"
	"strings"

	corev1 "allot.dev/allot/api/core/v1"
)

// containerEnv resolves a container's environment, in the container's
// order, as KEY=VALUE. Values may refer to variables defined before them
// as $(NAME), as in Kubernetes; valueFrom.fieldRef reads the pod's
// metadata.name, metadata.namespace, metadata.uid, metadata.labels['K'],
// metadata.annotations['K'], spec.nodeName, spec.serviceAccountName,
// status.hostIP and status.podIP. It also returns the variables as a map
// for expanding command and args.
func containerEnv(pod *corev1.Pod, c *corev1.Container, hostIP, podIP string) ([]string, map[string]string, error) {
	vars := make(map[string]string, len(c.Env))
	out := make([]string, 0, len(c.Env))
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	for _, e := range c.Env {
		v := expand(e.Value, lookup)
		if e.ValueFrom != nil {
			if e.ValueFrom.FieldRef == nil {
				return nil, nil, fmt.Errorf("env %s: valueFrom names no source", e.Name)
			}
			fv, err := podField(pod, e.ValueFrom.FieldRef.FieldPath, hostIP, podIP)
			if err != nil {
				return nil, nil, fmt.Errorf("env %s: %w", e.Name, err)
			}
			v = fv
		}
		vars[e.Name] = v
		out = append(out, e.Name+"="+v)
	}
	return out, vars, nil
}

// podField reads a fieldRef path of the pod.
func podField(pod *corev1.Pod, path, hostIP, podIP string) (string, error) {
	switch path {
	case "metadata.name":
		return pod.Name, nil
	case "metadata.namespace":
		return pod.Namespace, nil
	case "metadata.uid":
		return string(pod.UID), nil
	case "spec.nodeName":
		return pod.Spec.NodeName, nil
	case "spec.serviceAccountName":
		return pod.Spec.ServiceAccountName, nil
	case "status.hostIP":
		return hostIP, nil
	case "status.podIP":
		return podIP, nil
	}
	if key, ok := subscript(path, "metadata.labels"); ok {
		return pod.Labels[key], nil
	}
	if key, ok := subscript(path, "metadata.annotations"); ok {
		return pod.Annotations[key], nil
	}
	return "", fmt.Errorf("unsupported fieldRef path %q", path)
}

// subscript parses PREFIX['KEY'] or PREFIX["KEY"].
func subscript(path, prefix string) (string, bool) {
	rest, ok := strings.CutPrefix(path, prefix+"[")
	if !ok || !strings.HasSuffix(rest, "]") || len(rest) < 3 {
		return "", false
	}
	rest = rest[:len(rest)-1]
	q := rest[0]
	if (q != '\'' && q != '"') || rest[len(rest)-1] != q || len(rest) < 2 {
		return "", false
	}
	return rest[1 : len(rest)-1], true
}

// expandAll expands $(NAME) references in each string.
func expandAll(in []string, vars map[string]string) []string {
	if in == nil {
		return nil
	}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	out := make([]string, len(in))
	for i, s := range in {
		out[i] = expand(s, lookup)
	}
	return out
}

// expand replaces $(NAME) with NAME's value when defined, and $$ with $,
// leaving anything else (undefined names, an unterminated "$(") as
// written: Kubernetes' rules for env, command and args.
func expand(s string, lookup func(string) (string, bool)) string {
	if !strings.Contains(s, "$") {
		return s
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		if s[i] != '$' || i+1 >= len(s) {
			b.WriteByte(s[i])
			continue
		}
		switch s[i+1] {
		case '$':
			b.WriteByte('$')
			i++
		case '(':
			end := strings.IndexByte(s[i+2:], ')')
			if end < 0 {
				b.WriteString(s[i:])
				return b.String()
			}
			name := s[i+2 : i+2+end]
			if v, ok := lookup(name); ok {
				b.WriteString(v)
			} else {
				b.WriteString(s[i : i+3+end])
			}
			i += 2 + end
		default:
			b.WriteByte('$')
		}
	}
	return b.String()
}
