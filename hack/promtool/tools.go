//go:build tools

// Package tools pins the command this module builds; the build tag keeps it out of every real build.
package tools

import _ "github.com/prometheus/prometheus/cmd/promtool"
