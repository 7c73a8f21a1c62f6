//go:build tools

// Package tools pins the commands this module builds; the build tag keeps it out of every real build.
package tools

import (
	_ "go.etcd.io/etcd/server/v3"
	_ "helm.sh/helm/v3/cmd/helm"
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kubectl"
)
