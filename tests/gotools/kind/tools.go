//go:build tools

// Package tools pins the kind CLI's command, so that `go mod tidy` keeps its whole graph.
package tools

import _ "sigs.k8s.io/kind"
