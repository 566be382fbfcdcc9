package deps

import (
	_ "cel.dev/cel-go/cel"
	_ "github.com/blang/semver/v4"
	_ "github.com/evanphx/json-patch/v5"
	_ "github.com/fsnotify/fsnotify"
	_ "github.com/prometheus/client_golang/prometheus"
	_ "github.com/spf13/cobra"
	_ "go.etcd.io/etcd/client/v3"
	_ "go.etcd.io/etcd/server/v3/embed"
	_ "google.golang.org/grpc"
	_ "k8s.io/apimachinery/pkg/apis/meta/v1"
	_ "k8s.io/apimachinery/pkg/util/strategicpatch"
	_ "k8s.io/client-go/rest"
	_ "k8s.io/client-go/tools/cache"
	_ "k8s.io/kubelet/pkg/apis/deviceplugin/v1beta1"
	_ "k8s.io/kubelet/pkg/apis/pluginregistration/v1"
	_ "k8s.io/kubelet/pkg/apis/podresources/v1"
	_ "sigs.k8s.io/yaml"
	_ "tags.cncf.io/container-device-interface/pkg/cdi"
)
