package pods

import (
	"slices"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
)

func fieldEnv(name, path string) corev1.EnvVar {
	return corev1.EnvVar{Name: name, ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{FieldPath: path}}}
}

func TestContainerEnv(t *testing.T) {
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "prod", UID: "u-1",
			Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"team": "gpu"}},
		Spec: corev1.PodSpec{NodeName: "n1", ServiceAccountName: "sa"},
	}
	c := &corev1.Container{Env: []corev1.EnvVar{
		fieldEnv("NAME", "metadata.name"), fieldEnv("NS", "metadata.namespace"), fieldEnv("UID", "metadata.uid"),
		fieldEnv("NODE", "spec.nodeName"), fieldEnv("IP", "status.podIP"), fieldEnv("HOST", "status.hostIP"),
		fieldEnv("APP", "metadata.labels['app']"), fieldEnv("TEAM", `metadata.annotations["team"]`),
		fieldEnv("SA", "spec.serviceAccountName"),
		{Name: "URL", Value: "http://$(IP):80/$(NAME)/$(MISSING)/$$(NAME)"},
	}}
	env, _, err := containerEnv(pod, c, "10.0.0.2", "10.0.0.3")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"NAME=web", "NS=prod", "UID=u-1", "NODE=n1", "IP=10.0.0.3", "HOST=10.0.0.2", "APP=web", "TEAM=gpu", "SA=sa",
		"URL=http://10.0.0.3:80/web/$(MISSING)/$(NAME)"}
	if !slices.Equal(env, want) {
		t.Fatalf("env\n got  %q\n want %q", env, want)
	}
	if _, _, err := containerEnv(pod, &corev1.Container{Env: []corev1.EnvVar{fieldEnv("X", "spec.bogus")}}, "", ""); err == nil {
		t.Fatal("unsupported fieldRef accepted")
	}
}

func TestExpand(t *testing.T) {
	vars := map[string]string{"A": "1", "B": "two"}
	lookup := func(k string) (string, bool) { v, ok := vars[k]; return v, ok }
	tests := map[string]string{
		"plain":       "plain",
		"$(A)":        "1",
		"x$(A)y$(B)z": "x1ytwoz",
		"$$(A)":       "$(A)",
		"$(C)":        "$(C)",
		"$(A":         "$(A",
		"cost $5":     "cost $5",
		"trailing $":  "trailing $",
	}
	for in, want := range tests {
		if got := expand(in, lookup); got != want {
			t.Errorf("expand(%q) = %q, want %q", in, got, want)
		}
	}
}
