package e2e

import (
	"strings"
	"testing"
	"time"
)

// TestTokenCreate adds tokens with `allot token create` to a running
// cluster and uses them with kubectl: the API server picks them up without
// a restart and authorizes each by its role.
func TestTokenCreate(t *testing.T) {
	t.Parallel()
	c := newCluster(t)
	c.start(t)

	user := strings.TrimSpace(c.allot(t, "token", "create", "--data-dir", c.dataDir, "--role", "user", "--name", "alice"))
	if user == "" || strings.ContainsAny(user, " \n,") {
		t.Fatalf("allot token create printed %q, want one token", user)
	}
	asUser := func(args ...string) []string { return append([]string{"--token", user}, args...) }
	waitAccepted(t, c, asUser("get", "namespaces", "-o", "name")...)

	out := c.kubectl(t, asUser("run", "alice-pod", "-n", "default", "--image=busybox", "--restart=Never")...)
	requireLines(t, "kubectl run as a user", out, "pod/alice-pod created")
	requireLines(t, "kubectl get as a user", c.kubectl(t, asUser("get", "pods", "-n", "default", "-o", "name")...), "pod/alice-pod")
	stderr := c.kubectlExpectFail(t, asUser("create", "-f", "testdata/token-node.yaml")...)
	requireContains(t, "kubectl create node as a user: stderr", stderr,
		"Error from server (Forbidden)", `user "alice" may not create nodes`)
	requireLines(t, "kubectl create node as admin", c.kubectl(t, "create", "-f", "testdata/token-node.yaml"), "node/token-node created")
	stderr = c.kubectlExpectFail(t, asUser("delete", "node", "token-node")...)
	requireContains(t, "kubectl delete node as a user: stderr", stderr,
		"Error from server (Forbidden)", `nodes "token-node" is forbidden`)
	stderr = c.kubectlExpectFail(t, asUser("patch", "pod", "alice-pod", "-n", "default", "--subresource=status",
		"--type=merge", "-p", `{"status":{"phase":"Running"}}`)...)
	requireContains(t, "kubectl patch pods/status as a user: stderr", stderr, "Error from server (Forbidden)")

	stderr = c.kubectlExpectFail(t, "--token", "not-a-token", "get", "namespaces")
	requireContains(t, "kubectl with an unknown token: stderr", stderr, "error: You must be logged in to the server")

	stderr = c.allotExpectFail(t, "token", "create", "--data-dir", c.dataDir, "--role", "bogus", "--name", "x")
	requireContains(t, "allot token create --role bogus: stderr", stderr, `unknown role "bogus"`)
	stderr = c.allotExpectFail(t, "token", "create", "--data-dir", c.dataDir, "--role", "user")
	requireContains(t, "allot token create without --name: stderr", stderr, `required flag(s) "name" not set`)

	// Tokens survive a restart.
	c.restart(t)
	requireLines(t, "kubectl get as a user after restart", c.kubectl(t, asUser("get", "pods", "-n", "default", "-o", "name")...), "pod/alice-pod")
}

// waitAccepted polls a kubectl command until it succeeds: a token added to
// the tokens file is loaded by the running server a little later.
func waitAccepted(t *testing.T, c *cluster, args ...string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		_, stderr, err := c.runKubectl(args...)
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("kubectl %s still fails 60s after allot token create: %v\n%s", strings.Join(args, " "), err, stderr)
		}
		time.Sleep(250 * time.Millisecond)
	}
}
