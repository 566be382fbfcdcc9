package celenv

import (
	"sync"
	"sync/atomic"

	"cel.dev/cel-go/common/types"
	"cel.dev/cel-go/common/types/ref"
)

// literalCache remembers parsed string operands, so that a selector such
// as `quantities["memory"] >= "8Gi"` or `quantity("8Gi")` parses "8Gi"
// once, not once per device. Both environments use it, one cache per
// value type. Reads take no lock. It stops growing at literalCacheMax
// entries; strings beyond that are parsed each time. Errors are not
// cached.
type literalCache struct {
	m sync.Map // string -> ref.Val
	n atomic.Int64
}

const literalCacheMax = 8192

func (c *literalCache) get(s string, parse func(string) ref.Val) ref.Val {
	if v, ok := c.m.Load(s); ok {
		return v.(ref.Val)
	}
	v := parse(s)
	if !types.IsError(v) && c.n.Load() < literalCacheMax {
		if _, loaded := c.m.LoadOrStore(s, v); !loaded {
			c.n.Add(1)
		}
	}
	return v
}
