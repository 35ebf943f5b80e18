//go:build tools

// Package tools pins the kwok command in this module's dependency graph so
// that `go build sigs.k8s.io/kwok/cmd/kwok` builds exactly the version in go.mod.
package tools

import _ "sigs.k8s.io/kwok/cmd/kwok"
