//go:build tools

// Package tools pins the Pulumi CLI's command, so that `go mod tidy` keeps its whole graph.
package tools

import _ "github.com/pulumi/pulumi/pkg/v3/cmd/pulumi"
