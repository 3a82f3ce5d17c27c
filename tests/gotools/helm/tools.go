//go:build tools

// Package tools pins the Helm CLI's command, so that `go mod tidy` keeps its whole graph.
package tools

import _ "helm.sh/helm/v3/cmd/helm"
