package e2e

import (
	"strings"
	"testing"
)

// TestDRAAuthorization runs kubectl with node and user tokens against the
// DRA objects: a node publishes only its own NodeResourceSlices, and a
// user may create claims but not write their status (the scheduler and the
// drivers allocate, never users).
func TestDRAAuthorization(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t)
	c.kubectl(t, "apply", "-f", "testdata/dra-auth.yaml")

	node := strings.TrimSpace(c.allot(t, "token", "create", "--data-dir", c.dataDir, "--role", "node", "--name", "auth-n1"))
	user := strings.TrimSpace(c.allot(t, "token", "create", "--data-dir", c.dataDir, "--role", "user", "--name", "alice"))
	asNode := func(args ...string) []string { return append([]string{"--token", node}, args...) }
	asUser := func(args ...string) []string { return append([]string{"--token", user}, args...) }
	waitAccepted(t, c, asNode("get", "noderesourceslices", "-o", "name")...)
	waitAccepted(t, c, asUser("get", "resourceclaims", "-n", "auth", "-o", "name")...)

	// The node's own slice: create, update.
	requireLines(t, "create own slice as node auth-n1",
		c.kubectl(t, asNode("create", "-f", "testdata/dra-auth-slice-n1.yaml")...),
		"noderesourceslice.resource.k8s.io/auth-n1-gpu created")
	c.kubectl(t, asNode("label", "noderesourceslice", "auth-n1-gpu", "team=a")...)

	// Another node's slice: denied, and moving its own slice there too.
	stderr := c.kubectlExpectFail(t, asNode("create", "-f", "testdata/dra-auth-slice-n2.yaml")...)
	requireContains(t, "create auth-n2's slice as node auth-n1: stderr", stderr, "Error from server (Forbidden)", "auth-n2")
	stderr = c.kubectlExpectFail(t, asNode("patch", "noderesourceslice", "auth-n1-gpu", "--type=merge",
		"-p", `{"spec":{"nodeName":"auth-n2"}}`)...)
	requireContains(t, "move own slice to auth-n2 as node auth-n1: stderr", stderr, "auth-n2")
	c.kubectl(t, "create", "-f", "testdata/dra-auth-slice-n2.yaml")
	stderr = c.kubectlExpectFail(t, asNode("delete", "noderesourceslice", "auth-n2-gpu")...)
	requireContains(t, "delete auth-n2's slice as node auth-n1: stderr", stderr, "Error from server (Forbidden)")
	if got := c.jsonpath(t, "{.spec.nodeName}", "noderesourceslice", "auth-n1-gpu"); got != "auth-n1" {
		t.Errorf("slice auth-n1-gpu has nodeName %q after the refused patch, want auth-n1", got)
	}

	// A user writes claims, never their status.
	requireLines(t, "create a claim as a user",
		c.kubectl(t, asUser("create", "-f", "testdata/dra-auth-user-claim.yaml")...),
		"resourceclaim.resource.k8s.io/alice-claim created")
	stderr = c.kubectlExpectFail(t, asUser("patch", v1alpha2Claims, "auth-claim", "-n", "auth", "--subresource=status",
		"--type=merge", "-p", `{"status":{"driverName":"gpu.example.com","allocation":{"shareable":true}}}`)...)
	requireContains(t, "patch resourceclaims/status as a user: stderr", stderr, "Error from server (Forbidden)")
	if got := c.jsonpath(t, "{.status}", v1alpha2Claims, "auth-claim", "-n", "auth"); got != "" && got != "{}" {
		t.Errorf("claim status after the refused patch = %s, want empty", got)
	}
	// Nor the status of a claim through the node role.
	stderr = c.kubectlExpectFail(t, asNode("patch", v1alpha2Claims, "auth-claim", "-n", "auth", "--subresource=status",
		"--type=merge", "-p", `{"status":{"driverName":"gpu.example.com"}}`)...)
	requireContains(t, "patch resourceclaims/status as a node: stderr", stderr, "Error from server (Forbidden)")
}
