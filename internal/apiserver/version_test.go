package apiserver

import (
	"net/http"
	"strconv"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	"k8s.io/client-go/discovery"
	"k8s.io/client-go/rest"

	"allot.dev/allot/internal/version"
)

// TestVersionEndpoint: /version, read as client-go's discovery reads it
// and without credentials, gives allot's version in gitVersion and the
// Kubernetes API level in major and minor and in gitVersion's major.minor,
// which kubectl's skew check compares with its own.
func TestVersionEndpoint(t *testing.T) {
	dc, err := discovery.NewDiscoveryClientForConfig(&rest.Config{Host: testSrv.URL})
	if err != nil {
		t.Fatal(err)
	}
	info, err := dc.ServerVersionWithContext(t.Context())
	if err != nil {
		t.Fatalf("ServerVersion: %v", err)
	}
	want := version.Get()
	if *info != want {
		t.Errorf("/version = %+v, want %+v", *info, want)
	}
	if info.Major != version.KubernetesMajor || info.Minor != version.KubernetesMinor {
		t.Errorf("major.minor %s.%s, want the API level %s.%s", info.Major, info.Minor, version.KubernetesMajor, version.KubernetesMinor)
	}
	if v, ok := version.FromGitVersion(info.GitVersion); !ok || v != version.Version() {
		t.Errorf("gitVersion %q carries allot version %q (%v), want %q", info.GitVersion, v, ok, version.Version())
	}
	sv, err := utilversion.ParseSemantic(info.GitVersion)
	if err != nil {
		t.Fatalf("gitVersion %q does not parse as kubectl parses it: %v", info.GitVersion, err)
	}
	if strconv.Itoa(int(sv.Major())) != info.Major || strconv.Itoa(int(sv.Minor())) != info.Minor {
		t.Errorf("gitVersion %q is at %d.%d, major.minor say %s.%s", info.GitVersion, sv.Major(), sv.Minor(), info.Major, info.Minor)
	}
	if info.GoVersion == "" || info.GoVersion == "go" || info.Compiler == "" || info.Platform == "" {
		t.Errorf("build facts missing: %+v", info)
	}

	r := call(t, "", http.MethodGet, "/version", nil)
	expect(t, r, http.StatusOK, `"gitVersion":"`+version.GitVersion()+`"`, `"major":"`+version.KubernetesMajor+`"`)
}
