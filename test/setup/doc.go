// Package setup tests hack/setup.sh, the script that readies a fresh
// Debian machine, by running the real script in a copy of the repository's
// layout with every command it calls stubbed on PATH, and checks that the
// kubectl it builds stays in step with allot's client-go.
//
// It has no code of its own: the tests are in setup_test.go and
// progress_test.go.
package setup
