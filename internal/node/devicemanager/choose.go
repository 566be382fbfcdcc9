package devicemanager

import (
	"sort"
)

// chooseDevices picks n device IDs from available (sorted), all of
// mustInclude first, then preferring devices that share a NUMA node: the
// NUMA node that alone fits the rest with the fewest spare devices (to
// keep large nodes whole), else nodes with the most available devices
// first. It is pure; nil means there are not enough devices.
func chooseDevices(available []Device, mustInclude []string, n int) []string {
	if n > len(available) || len(mustInclude) > n {
		return nil
	}
	chosen := append([]string(nil), mustInclude...)
	taken := map[string]bool{}
	for _, id := range mustInclude {
		taken[id] = true
	}
	byNode := map[int64][]string{}
	var nodes []int64
	for _, d := range available {
		if taken[d.ID] {
			continue
		}
		node := int64(-1)
		if len(d.NUMA) > 0 {
			node = d.NUMA[0]
		}
		if byNode[node] == nil {
			nodes = append(nodes, node)
		}
		byNode[node] = append(byNode[node], d.ID)
	}
	need := n - len(chosen)
	sort.Slice(nodes, func(i, j int) bool {
		a, b := len(byNode[nodes[i]]), len(byNode[nodes[j]])
		if (a >= need) != (b >= need) {
			return a >= need // nodes that fit alone first
		}
		if a >= need && a != b {
			return a < b // best fit among those
		}
		if a != b {
			return a > b // otherwise the fullest first
		}
		return nodes[i] < nodes[j]
	})
	for _, node := range nodes {
		for _, id := range byNode[node] {
			if len(chosen) == n {
				return chosen
			}
			chosen = append(chosen, id)
		}
	}
	if len(chosen) != n {
		return nil
	}
	return chosen
}

// validPreferred reports whether a plugin's preferred allocation can be
// honoured: n distinct available devices including mustInclude.
func validPreferred(ids []string, available map[string]bool, mustInclude []string, n int) bool {
	if len(ids) != n {
		return false
	}
	seen := map[string]bool{}
	for _, id := range ids {
		if seen[id] || !available[id] {
			return false
		}
		seen[id] = true
	}
	for _, id := range mustInclude {
		if !seen[id] {
			return false
		}
	}
	return true
}
