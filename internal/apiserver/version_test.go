package apiserver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"strconv"
	"strings"
	"testing"

	utilversion "k8s.io/apimachinery/pkg/util/version"
	apiversion "k8s.io/apimachinery/pkg/version"
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

// TestKubectlVersion: real kubectl reads the server at the API level allot
// serves and succeeds whatever its own version; one more than a minor away
// from that level only warns, as against a Kubernetes API server.
func TestKubectlVersion(t *testing.T) {
	kubectlBin(t)
	ns := newNamespace(t)
	out, code := kubectl(t, ns, "", "version", "-o", "json")
	if code != 0 {
		t.Fatalf("kubectl version -o json: exit %d\n%s", code, out)
	}
	// A skew warning goes to stderr, which kubectl() merges in.
	var kv struct{ ClientVersion, ServerVersion *apiversion.Info }
	if err := json.Unmarshal([]byte(out[strings.Index(out, "{"):strings.LastIndex(out, "}")+1]), &kv); err != nil || kv.ClientVersion == nil || kv.ServerVersion == nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, out)
	}
	if got, want := *kv.ServerVersion, version.Get(); got.GitVersion != want.GitVersion || got.Major != "1" || got.Minor != "37" {
		t.Errorf("kubectl reads server version %+v, want gitVersion %s at 1.37", got, want.GitVersion)
	}
	client, err := utilversion.ParseSemantic(kv.ClientVersion.GitVersion)
	if err != nil {
		t.Fatalf("kubectl's own gitVersion %q: %v", kv.ClientVersion.GitVersion, err)
	}

	out, code = kubectl(t, ns, "", "version")
	if code != 0 || !strings.Contains(out, "Server Version: "+version.GitVersion()+"\n") {
		t.Fatalf("kubectl version: exit %d, want 0 and Server Version %s\n%s", code, version.GitVersion(), out)
	}
	skew := client.Major() != 1 || client.Minor()+1 < 37 || client.Minor() > 37+1
	warning := fmt.Sprintf("WARNING: version difference between client (%d.%d) and server (1.37)", client.Major(), client.Minor())
	if got := strings.Contains(out, "WARNING: version difference"); got != skew || (skew && !strings.Contains(out, warning)) {
		t.Errorf("kubectl %s against the 1.37 API: skew warning %v, want %v (%q)\n%s", kv.ClientVersion.GitVersion, got, skew, warning, out)
	}
	t.Logf("kubectl %s: %s", kv.ClientVersion.GitVersion, strings.TrimSpace(out))
}
