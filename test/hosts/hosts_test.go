package hosts

import (
	"testing"
)

// TestSeparateHosts runs the scenarios on one cluster of three hosts, in
// order; each leaves every node Ready and no pod behind. It logs what it
// measured: the recovery times of docs/operator-guide.md, "When a machine
// fails".
func TestSeparateHosts(t *testing.T) {
	requireHosts(t)
	c := startCluster(t, 3)
	c.setUp(t)
	var measured []recovery
	var took []takeover
	t.Run("link cut", func(t *testing.T) {
		measured = append(measured, loseNode(t, c, c.nodes[0], c.nodes[1], false, "cut"))
	})
	t.Run("node deleted", func(t *testing.T) {
		measured = append(measured, loseNode(t, c, c.nodes[2], c.nodes[0], true, "deleted"))
	})
	t.Run("leaders killed during a churn", func(t *testing.T) {
		took = churnKillingLeaders(t, c)
	})
	t.Run("fabric units after the fence", func(t *testing.T) {
		measured = append(measured, fence(t, c, c.nodes[0], c.nodes[1], c.nodes[2], false, "fence"))
	})
	t.Run("fabric units after the fence, Node deleted", func(t *testing.T) {
		measured = append(measured, fence(t, c, c.nodes[2], c.nodes[0], c.nodes[1], true, "fence-deleted"))
	})
	for _, r := range measured {
		t.Log(r)
	}
	for _, k := range took {
		t.Log(k)
	}
}
