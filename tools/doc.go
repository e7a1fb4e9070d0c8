// Package tools pins the code generators and linters toolscope builds with.
//
// It is its own module, outside go.work, so that buf's large dependency graph
// never leaks into the runtime modules. The versions live in go.mod as `tool`
// directives; the Makefile builds them into .bin/ with `go build`.
package tools
