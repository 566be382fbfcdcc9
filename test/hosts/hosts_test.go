package hosts

import (
	"testing"
)

// TestSeparateHosts runs the scenarios on one cluster of three hosts, in
// order; each leaves every node Ready and no pod behind.
func TestSeparateHosts(t *testing.T) {
	requireHosts(t)
	c := startCluster(t, 3)
	c.setUp(t)
	var measured []recovery
	t.Run("link cut", func(t *testing.T) {
		measured = append(measured, loseNode(t, c, c.nodes[0], c.nodes[1], false, "cut"))
	})
	t.Run("node deleted", func(t *testing.T) {
		measured = append(measured, loseNode(t, c, c.nodes[2], c.nodes[0], true, "deleted"))
	})
	for _, r := range measured {
		t.Log(r)
	}
}
