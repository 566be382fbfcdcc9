package pods

import (
	"context"
	"reflect"
	"testing"

	corev1 "allot.dev/allot/api/core/v1"
)

func TestCDIAnnotations(t *testing.T) {
	tests := map[string]struct {
		ann     map[string]string
		want    []string
		wantErr bool
	}{
		"none":     {},
		"other":    {ann: map[string]string{"example.com/x": "y"}},
		"one":      {ann: map[string]string{"cdi.k8s.io/gpu": "example.com/gpu=gpu0"}, want: []string{"example.com/gpu=gpu0"}},
		"two":      {ann: map[string]string{"cdi.k8s.io/gpus": "example.com/gpu=gpu0,example.com/gpu=gpu1"}, want: []string{"example.com/gpu=gpu0", "example.com/gpu=gpu1"}},
		"bad name": {ann: map[string]string{"cdi.k8s.io/gpu": "gpu0"}, wantErr: true},
	}
	for name, tc := range tests {
		t.Run(name, func(t *testing.T) {
			pod := &corev1.Pod{}
			pod.Annotations = tc.ann
			got, err := CDIAnnotations{}.ContainerOptions(context.Background(), pod, &corev1.Container{})
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, wantErr %v", err, tc.wantErr)
			}
			if !reflect.DeepEqual(got.CDIDevices, tc.want) {
				t.Fatalf("devices = %v, want %v", got.CDIDevices, tc.want)
			}
		})
	}
}
