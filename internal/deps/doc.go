// Package deps pins the module's chosen dependencies: it imports each for
// its side effects only, so that go.mod requires them (and `go mod tidy`
// keeps them) whichever of them the code uses at the moment. Nothing
// imports it.
package deps
