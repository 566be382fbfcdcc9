package allocator

import (
	"container/list"
	"strings"
	"sync"
)

// selectorCacheSize bounds the compiled selectors kept in memory. A
// scheduler sees few distinct selectors (one per vendor parameter shape),
// so this is generous.
const selectorCacheSize = 4096

type cacheEntry struct {
	sel *selector
	err error
}

// lru is a small mutex-guarded least-recently-used cache.
type lru struct {
	mu    sync.Mutex
	max   int
	order *list.List // front is most recent; values are *lruItem
	items map[string]*list.Element
}

type lruItem struct {
	key string
	val cacheEntry
}

var selectorCache = newLRU(selectorCacheSize)

func newLRU(size int) *lru {
	return &lru{max: size, order: list.New(), items: map[string]*list.Element{}}
}

func (c *lru) get(key string) (cacheEntry, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	el, ok := c.items[key]
	if !ok {
		return cacheEntry{}, false
	}
	c.order.MoveToFront(el)
	return el.Value.(*lruItem).val, true
}

func (c *lru) add(key string, val cacheEntry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if el, ok := c.items[key]; ok {
		c.order.MoveToFront(el)
		return
	}
	c.items[key] = c.order.PushFront(&lruItem{key: key, val: val})
	for c.order.Len() > c.max {
		last := c.order.Back()
		c.order.Remove(last)
		delete(c.items, last.Value.(*lruItem).key)
	}
}

// splitConjuncts splits a CEL expression at its top-level && operators,
// verbatim, so an explanation can quote the clause that failed. It returns
// the whole expression when the top level holds || or ?: (the expression is
// not a plain conjunction), and strips parentheses that enclose a whole
// clause.
func splitConjuncts(src string) []string {
	var parts []string
	depth, start := 0, 0
	for i := 0; i < len(src); i++ {
		switch c := src[i]; {
		case c == '"' || c == '\'':
			i = skipString(src, i)
		case c == '/' && i+1 < len(src) && src[i+1] == '/':
			for i < len(src) && src[i] != '\n' {
				i++
			}
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
		case depth != 0:
		case c == '?' || (c == '|' && i+1 < len(src) && src[i+1] == '|'):
			return []string{strings.TrimSpace(src)}
		case c == '&' && i+1 < len(src) && src[i+1] == '&':
			parts = append(parts, src[start:i])
			start = i + 2
			i++
		}
	}
	parts = append(parts, src[start:])
	if len(parts) == 1 {
		if inner, ok := stripParens(strings.TrimSpace(src)); ok {
			return splitConjuncts(inner)
		}
		return []string{strings.TrimSpace(src)}
	}
	var out []string
	for _, p := range parts {
		p = strings.TrimSpace(p)
		if inner, ok := stripParens(p); ok && len(splitConjuncts(inner)) > 1 {
			out = append(out, splitConjuncts(inner)...)
			continue
		}
		out = append(out, p)
	}
	return out
}

// skipString returns the index of the closing quote of the string literal
// whose opening quote is at src[i]; raw strings (r"...") have no escapes.
func skipString(src string, i int) int {
	q := src[i]
	raw := i > 0 && (src[i-1] == 'r' || src[i-1] == 'R')
	triple := strings.HasPrefix(src[i:], strings.Repeat(string(q), 3))
	if triple {
		end := strings.Index(src[i+3:], strings.Repeat(string(q), 3))
		if end < 0 {
			return len(src)
		}
		return i + 3 + end + 2
	}
	for j := i + 1; j < len(src); j++ {
		switch {
		case src[j] == '\\' && !raw:
			j++
		case src[j] == q:
			return j
		}
	}
	return len(src)
}

// stripParens removes one pair of parentheses that encloses all of s.
func stripParens(s string) (string, bool) {
	if len(s) < 2 || s[0] != '(' || s[len(s)-1] != ')' {
		return "", false
	}
	depth := 0
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '"' || c == '\'':
			i = skipString(s, i)
		case c == '(' || c == '[' || c == '{':
			depth++
		case c == ')' || c == ']' || c == '}':
			depth--
			if depth == 0 && i != len(s)-1 {
				return "", false
			}
		}
	}
	return strings.TrimSpace(s[1 : len(s)-1]), true
}
