package client

import (
	"fmt"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

func metaAccessor(obj runtime.Object) (metav1.Object, error) {
	acc, err := meta.Accessor(obj)
	if err != nil {
		return nil, fmt.Errorf("access metadata of %T: %w", obj, err)
	}
	return acc, nil
}
