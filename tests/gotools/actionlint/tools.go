//go:build tools

// Package tools pins actionlint's command, so that `go mod tidy` keeps its whole graph.
package tools

import _ "github.com/rhysd/actionlint/cmd/actionlint"
