// Package deploy holds the manifests of the example control-plane DRA
// driver fabric.example.com, embedded so that a binary (`allot up --demo`)
// can apply them without the source tree:
//
//   - CRD (crd.yaml): the FabricClaimParameters CustomResourceDefinition;
//   - Class (class.yaml): the ResourceClass fabric.example.com, whose
//     controllerName makes the driver's controller allocate its claims;
//   - Example (example/fabric-pair.yaml): a user's FabricClaimParameters,
//     ResourceClaimTemplates and a pod (in the namespace of the context).
//
// `allot apply -f examples/fabric-driver/deploy` installs the driver's
// part only (directories are not read recursively); the example is
// separate. Apply them in the order of All, and wait for the CRD to be
// served before applying Example.
package deploy

import _ "embed"

// The manifests, as YAML documents separated by "---".
var (
	//go:embed crd.yaml
	CRD []byte
	//go:embed class.yaml
	Class []byte
	//go:embed example/fabric-pair.yaml
	Example []byte
)

// Manifest is one embedded manifest file.
type Manifest struct {
	// Name is the file's path in examples/fabric-driver/deploy, such as
	// crd.yaml.
	Name string
	Data []byte
}

// All returns the manifests in the order to apply them: CRD, Class,
// Example.
func All() []Manifest {
	return []Manifest{{"crd.yaml", CRD}, {"class.yaml", Class}, {"example/fabric-pair.yaml", Example}}
}
