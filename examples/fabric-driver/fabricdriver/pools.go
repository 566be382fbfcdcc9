package fabricdriver

import (
	_ "embed"
	"errors"
	"fmt"
	"os"
	"strings"

	utilvalidation "k8s.io/apimachinery/pkg/util/validation"
	"sigs.k8s.io/yaml"

	corev1 "allot.dev/allot/api/core/v1"
)

//go:embed default-pools.yaml
var defaultPools []byte

// MaxPoolCapacity bounds a pool's capacity, so that unit IDs stay short
// and a typo cannot make the driver count millions of units.
const MaxPoolCapacity = 1024

// Pool is a set of network-attached accelerators of one model, reachable
// from the nodes that carry every label of NodeSelector.
type Pool struct {
	// Name is a DNS label; unit IDs are NAME-0, NAME-1, ...
	Name string `json:"name"`
	// Model is the accelerators' model, which claims may ask for.
	Model string `json:"model"`
	// Capacity is the number of units, at most MaxPoolCapacity.
	Capacity int `json:"capacity"`
	// NodeSelector holds the labels a node needs to reach the pool, for
	// example fabric.example.com/rack: r1.
	NodeSelector map[string]string `json:"nodeSelector"`
}

// Pools is the driver's configuration file.
type Pools struct {
	Pools []Pool `json:"pools"`
}

// LoadPools reads the pools from a YAML (or JSON) file; "" means the
// built-in default-pools.yaml. Unknown fields and invalid pools are
// errors naming the field.
func LoadPools(path string) (*Pools, error) {
	data, name := defaultPools, "built-in pools"
	if path != "" {
		var err error
		if data, err = os.ReadFile(path); err != nil {
			return nil, fmt.Errorf("read pools: %w", err)
		}
		name = path
	}
	p, err := ParsePools(data)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", name, err)
	}
	return p, nil
}

// ParsePools decodes and validates a pools document.
func ParsePools(data []byte) (*Pools, error) {
	var p Pools
	if err := yaml.UnmarshalStrict(data, &p); err != nil {
		return nil, fmt.Errorf("decode pools: %w", err)
	}
	if err := p.validate(); err != nil {
		return nil, err
	}
	return &p, nil
}

func (p *Pools) validate() error {
	if len(p.Pools) == 0 {
		return errors.New("pools: at least one pool is required")
	}
	var errs []error
	seen := map[string]bool{}
	for i, pool := range p.Pools {
		path := fmt.Sprintf("pools[%d]", i)
		if msgs := utilvalidation.IsDNS1123Label(pool.Name); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.name %q: %s", path, pool.Name, strings.Join(msgs, "; ")))
		} else if seen[pool.Name] {
			errs = append(errs, fmt.Errorf("%s.name %q: duplicate pool name", path, pool.Name))
		}
		seen[pool.Name] = true
		if msgs := utilvalidation.IsValidLabelValue(pool.Model); pool.Model == "" || len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("%s.model %q: must be a non-empty label value %s", path, pool.Model, strings.Join(msgs, "; ")))
		}
		if pool.Capacity < 1 || pool.Capacity > MaxPoolCapacity {
			errs = append(errs, fmt.Errorf("%s.capacity %d: must be between 1 and %d", path, pool.Capacity, MaxPoolCapacity))
		}
		if len(pool.NodeSelector) == 0 {
			errs = append(errs, fmt.Errorf("%s.nodeSelector: at least one label is required", path))
		}
		for _, k := range sortedKeys(pool.NodeSelector) {
			v := pool.NodeSelector[k]
			if msgs := utilvalidation.IsQualifiedName(k); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.nodeSelector key %q: %s", path, k, strings.Join(msgs, "; ")))
			}
			if msgs := utilvalidation.IsValidLabelValue(v); len(msgs) > 0 {
				errs = append(errs, fmt.Errorf("%s.nodeSelector[%s] %q: %s", path, k, v, strings.Join(msgs, "; ")))
			}
		}
	}
	return errors.Join(errs...)
}

// Get returns the pool called name.
func (p *Pools) Get(name string) (Pool, bool) {
	for _, pool := range p.Pools {
		if pool.Name == name {
			return pool, true
		}
	}
	return Pool{}, false
}

// Reachable reports whether a node with these labels reaches the pool.
func (p Pool) Reachable(nodeLabels map[string]string) bool {
	for k, v := range p.NodeSelector {
		if got, ok := nodeLabels[k]; !ok || got != v {
			return false
		}
	}
	return true
}

// UnitID is the ID of the pool's unit i.
func (p Pool) UnitID(i int) string { return fmt.Sprintf("%s-%d", p.Name, i) }

// HasUnit reports whether id is one of the pool's unit IDs.
func (p Pool) HasUnit(id string) bool {
	for i := range p.Capacity {
		if p.UnitID(i) == id {
			return true
		}
	}
	return false
}

// AvailableOnNodes is the node selector of the nodes that reach the pool:
// one term requiring each label.
func (p Pool) AvailableOnNodes() *corev1.NodeSelector {
	term := corev1.NodeSelectorTerm{}
	for _, k := range sortedKeys(p.NodeSelector) {
		term.MatchExpressions = append(term.MatchExpressions, corev1.NodeSelectorRequirement{
			Key: k, Operator: corev1.NodeSelectorOpIn, Values: []string{p.NodeSelector[k]}})
	}
	return &corev1.NodeSelector{NodeSelectorTerms: []corev1.NodeSelectorTerm{term}}
}
