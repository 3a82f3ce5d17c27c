//go:build tools

// Package tools pins the CNCF distribution registry's command, so that `go mod tidy` keeps its
// whole graph.
package tools

import _ "github.com/distribution/distribution/v3/cmd/registry"
