//go:build tools

// Package tools pins the YAML language host's command, so that `go mod tidy` keeps its graph.
package tools

import _ "github.com/pulumi/pulumi-yaml/cmd/pulumi-language-yaml"
