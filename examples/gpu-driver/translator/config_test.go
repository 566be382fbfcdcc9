package translator

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	apiextv1 "allot.dev/allot/api/apiextensions/v1"
	"allot.dev/allot/pkg/client"
)

func TestRunRejectsBadConfig(t *testing.T) {
	tests := map[string]struct {
		cfg  Config
		want string
	}{
		"no client":        {Config{}, "client is required"},
		"negative workers": {Config{Client: admin, Workers: -1}, "workers: must not be negative"},
		"negative resync":  {Config{Client: admin, Resync: -time.Second}, "resync: must not be negative"},
		"retry bounds":     {Config{Client: admin, MinRetryDelay: time.Minute, MaxRetryDelay: time.Second}, "min retry delay 1m0s exceeds max retry delay 1s"},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			err := Run(context.Background(), tc.cfg)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Fatalf("Run = %v, want an error containing %q", err, tc.want)
			}
		})
	}
}

// TestRunRejectedCredentials: a token the API server does not know is an
// error, not an endless wait for the CRD.
func TestRunRejectedCredentials(t *testing.T) {
	rc := admin.RESTConfig()
	rc.BearerToken = "not-a-token"
	c, err := client.NewForConfig(rc)
	if err != nil {
		t.Fatal(err)
	}
	err = Run(testContext(t), Config{Client: c, CRDPollInterval: 10 * time.Millisecond})
	if err == nil || !strings.Contains(err.Error(), "list gpuclaimparameters.gpu.example.com") {
		t.Fatalf("Run = %v, want a list error", err)
	}
}

// TestWaitForResource: Run's start waits for a CRD that is not installed
// yet, says so, and goes on once the resource is served.
func TestWaitForResource(t *testing.T) {
	group := fmt.Sprintf("wait%d.example.com", nameSeq.Add(1))
	gvr := schema.GroupVersionResource{Group: group, Version: "v1", Resource: "widgets"}
	logs := &syncBuffer{}
	cfg := Config{Client: driver, CRDPollInterval: 10 * time.Millisecond, CRDWarnAfter: 300 * time.Millisecond,
		Logger: slog.New(slog.NewTextHandler(logs, nil))}
	cfg.defaults()
	done := make(chan error, 1)
	go func() { done <- waitForResource(testContext(t), &cfg, gvr) }()
	eventually(t, "the waiting message", func() bool {
		return strings.Contains(logs.String(), "level=INFO msg=\"resource not served yet") && strings.Contains(logs.String(), "widgets."+group)
	})
	if strings.Contains(logs.String(), "level=WARN") {
		t.Fatalf("a CRD missing for a moment is normal, not a warning:\n%s", logs)
	}
	eventually(t, "the warning once the CRD stays missing", func() bool {
		return strings.Contains(logs.String(), "level=WARN msg=\"resource still not served")
	})
	select {
	case err := <-done:
		t.Fatalf("returned %v before the CRD exists", err)
	default:
	}
	crd := &apiextv1.CustomResourceDefinition{
		ObjectMeta: metav1.ObjectMeta{Name: "widgets." + group},
		Spec: apiextv1.CustomResourceDefinitionSpec{
			Group: group, Scope: apiextv1.NamespaceScoped,
			Names: apiextv1.CustomResourceDefinitionNames{Plural: "widgets", Kind: "Widget"},
			Versions: []apiextv1.CustomResourceDefinitionVersion{{Name: "v1", Served: true, Storage: true,
				Schema: &apiextv1.CustomResourceValidation{OpenAPIV3Schema: &apiextv1.JSONSchemaProps{Type: "object"}}}},
		},
	}
	if _, err := admin.CustomResourceDefinitions().Create(testContext(t), crd); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("waitForResource = %v", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("still waiting after the CRD was created")
	}
}
