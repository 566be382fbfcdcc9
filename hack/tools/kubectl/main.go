// Command kubectl is upstream kubectl (k8s.io/kubectl), built from the Go
// module proxy so that allot's setup and tests need no kubectl package:
// Debian has none. hack/setup.sh builds it into _output/bin/kubectl when no
// kubectl is on PATH, and so do the tests that drive allot with kubectl.
//
// It lives in its own module so that allot's go.mod does not carry
// kubectl's dependencies; its k8s.io/kubectl version follows allot's
// k8s.io/client-go (test/setup checks that the two agree).
package main

import (
	"k8s.io/component-base/cli"
	"k8s.io/kubectl/pkg/cmd"
	"k8s.io/kubectl/pkg/cmd/util"
)

func main() {
	// As upstream's cmd/kubectl: cobra's own error printing is off, and
	// util.CheckErr prints the error kubectl's way and sets the exit code.
	if err := cli.RunNoErrOutput(cmd.NewDefaultKubectlCommand()); err != nil {
		util.CheckErr(err)
	}
}
