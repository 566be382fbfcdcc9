package e2e

import (
	"encoding/json"
	"strconv"
	"strings"
	"testing"

	apiversion "k8s.io/apimachinery/pkg/version"

	"allot.dev/allot/internal/version"
)

// TestVersions: kubectl version reads the server at the Kubernetes API
// level allot serves (no skew warning from a kubectl within one minor of
// it) and shows allot's version; `allot version` and a node agent's
// status report the same allot version.
func TestVersions(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t)

	stdout, stderr, err := c.runKubectl("version", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl version: %v\nstderr: %s\nstdout: %s", err, stderr, stdout)
	}
	var kv struct{ ClientVersion, ServerVersion *apiversion.Info }
	if err := json.Unmarshal([]byte(stdout), &kv); err != nil || kv.ClientVersion == nil || kv.ServerVersion == nil {
		t.Fatalf("kubectl version -o json: %v\n%s", err, stdout)
	}
	server := *kv.ServerVersion
	if server.Major != version.KubernetesMajor || server.Minor != version.KubernetesMinor {
		t.Errorf("server major.minor %s.%s, want the API level %s.%s", server.Major, server.Minor, version.KubernetesMajor, version.KubernetesMinor)
	}
	allotVersion, ok := version.FromGitVersion(server.GitVersion)
	if !ok {
		t.Fatalf("server gitVersion %q carries no allot version", server.GitVersion)
	}
	// kubectl warns when its gitVersion's minor and the server's are more
	// than one apart; the server's must read as the API level.
	_, stderr, err = c.runKubectl("version")
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, stderr)
	}
	apiLevel := version.KubernetesMajor + "." + version.KubernetesMinor
	if w := strings.Contains(stderr, "WARNING: version difference"); w && !strings.Contains(stderr, "server ("+apiLevel+")") {
		t.Errorf("kubectl version reads the server at another level than %s: %s", apiLevel, stderr)
	} else if w && kubectlWithinOneMinor(kv.ClientVersion.GitVersion) {
		t.Errorf("kubectl %s warns of version skew: %s", kv.ClientVersion.GitVersion, stderr)
	}

	requireLines(t, "allot version", c.allot(t, "version"),
		"Client Version: "+allotVersion, "Server Version: "+allotVersion, "Server API Level: Kubernetes "+apiLevel)

	c.startNode(t, "version-node", "fake", t.TempDir())
	var got string
	waitFor(t, "node version-node to report its version", func() bool {
		got, _, err = c.runKubectl("get", "node", "version-node", "-o", "jsonpath={.status.nodeInfo.kubeletVersion}")
		return err == nil && got != ""
	})
	if got != server.GitVersion {
		t.Errorf("node kubeletVersion %q, want the server's gitVersion %q", got, server.GitVersion)
	}
	if out := c.kubectl(t, "get", "node", "version-node", "-o", "wide"); !strings.Contains(out, " "+server.GitVersion+" ") {
		t.Errorf("kubectl get node -o wide shows no VERSION %s:\n%s", server.GitVersion, out)
	}
}

// kubectlWithinOneMinor: kubectl at gitVersion is within one minor of
// the API level, so it must not warn.
func kubectlWithinOneMinor(gitVersion string) bool {
	parts := strings.SplitN(strings.TrimPrefix(gitVersion, "v"), ".", 3)
	if len(parts) < 2 || parts[0] != version.KubernetesMajor {
		return false
	}
	minor, err := strconv.Atoi(parts[1])
	level, err2 := strconv.Atoi(version.KubernetesMinor)
	return err == nil && err2 == nil && minor >= level-1 && minor <= level+1
}
