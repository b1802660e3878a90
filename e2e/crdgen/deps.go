//go:build crdgen

// Package crdgen only anchors volcano.sh/apis in go.mod so `go mod tidy`
// keeps it; controller-gen loads the packages by import path.
package crdgen

import (
	_ "volcano.sh/apis/pkg/apis/batch/v1alpha1"
	_ "volcano.sh/apis/pkg/apis/scheduling/v1beta1"
)
