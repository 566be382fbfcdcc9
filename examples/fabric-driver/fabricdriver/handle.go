package fabricdriver

import (
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"slices"
)

// Handle is the opaque data of an allocation (resourceHandles[].data):
// the pool and the units the claim got, or Fallback when an optional
// request got nothing. The controller derives its bookkeeping from the
// handles of allocated claims; the kubelet plugin attaches the units.
type Handle struct {
	Pool     string   `json:"pool,omitempty"`
	Model    string   `json:"model,omitempty"`
	Units    []string `json:"units,omitempty"`
	Fallback bool     `json:"fallback,omitempty"`
}

// Encode returns the handle as resource handle data.
func (h Handle) Encode() string {
	data, err := json.Marshal(h)
	if err != nil {
		panic(fmt.Sprintf("encode fabric handle: %v", err)) // a struct of strings always encodes
	}
	return string(data)
}

// DecodeHandle parses resource handle data and checks its shape: units
// with a pool, or a fallback without either.
func DecodeHandle(data string) (Handle, error) {
	var h Handle
	if data == "" {
		return h, errors.New("resourceHandle: empty; claims of " + DriverName + " are allocated by its controller")
	}
	if err := json.Unmarshal([]byte(data), &h); err != nil {
		return h, fmt.Errorf("resourceHandle: not a %s handle: %w", DriverName, err)
	}
	switch {
	case h.Fallback && (h.Pool != "" || len(h.Units) > 0):
		return h, errors.New("resourceHandle: a fallback has no pool and no units")
	case !h.Fallback && (h.Pool == "" || len(h.Units) == 0):
		return h, errors.New("resourceHandle: pool and units are required")
	}
	return h, nil
}

func sortedKeys[V any](m map[string]V) []string {
	return slices.Sorted(maps.Keys(m))
}
