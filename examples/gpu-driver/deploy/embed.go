// Package deploy holds the manifests of the example DRA driver
// gpu.example.com, embedded so that a binary (`allot up --demo`) can apply
// them without the source tree:
//
//   - CRD (crd.yaml): the GpuClaimParameters CustomResourceDefinition;
//   - Class (class.yaml): the ResourceClass gpu.example.com and its
//     ResourceClassParameters (an administrator's part);
//   - Example (example/gpu-pair.yaml): a user's GpuClaimParameters,
//     ResourceClaimTemplate and a pod whose two containers share the claim
//     generated for it (in the namespace of the context).
//
// `allot apply -f examples/gpu-driver/deploy` installs the driver's part
// only (directories are not read recursively); the example is separate.
// Apply them in the order of All, and wait for the CRD to be served
// before applying Example.
package deploy

import _ "embed"

// The manifests, as YAML documents separated by "---".
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed class.yaml
	Class []byte
	//go:embed example/gpu-pair.yaml
	Example []byte
)

// Manifest is one embedded manifest file.
type Manifest struct {
	// Name is the file's path in examples/gpu-driver/deploy, such as
	// crd.yaml.
	Name string
	Data []byte
}

// All returns the manifests in the order to apply them: CRD, Class,
// Example. Names are paths relative to this directory.
func All() []Manifest {
	return []Manifest{{"crd.yaml", CRD}, {"class.yaml", Class}, {"example/gpu-pair.yaml", Example}}
}
