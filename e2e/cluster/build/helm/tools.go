//go:build tools

// Package tools pins the helm CLI in this module's dependency graph so that
// `go build helm.sh/helm/v3/cmd/helm` builds exactly the version in go.mod.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
