package apiserver

import (
	"encoding/json"
	"fmt"
	"mime"
	"net/http"

	coordinationv1 "k8s.io/api/coordination/v1"
	kcorev1 "k8s.io/api/core/v1"
	resourcev1 "k8s.io/api/resource/v1"
	resourcev1alpha3 "k8s.io/api/resource/v1alpha3"
	resourcev1beta2 "k8s.io/api/resource/v1beta2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer/protobuf"
)

// protobufType is the content type Kubernetes clients use for core kinds;
// kubectl sends it for some commands (create namespace, for example).
const protobufType = "application/vnd.kubernetes.protobuf"

// protoScheme knows Kubernetes' own core/v1, resource.k8s.io/v1 (and the
// v1beta2 and v1alpha3 of its DeviceTaintRule, versions_alias.go) and
// coordination.k8s.io/v1 types, which carry the protobuf encoding; allot's
// own types are JSON only.
var protoScheme = func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{kcorev1.AddToScheme, resourcev1.AddToScheme, resourcev1beta2.AddToScheme, resourcev1alpha3.AddToScheme, coordinationv1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("register Kubernetes types for protobuf: %v", err))
		}
	}
	return s
}()

var protoSerializer = protobuf.NewSerializer(protoScheme, protoScheme)

func isProtobuf(r *http.Request) bool {
	mt, _, err := mime.ParseMediaType(r.Header.Get("Content-Type"))
	return err == nil && mt == protobufType
}

// protobufToJSON decodes a protobuf body of a Kubernetes core kind and
// re-encodes it as JSON, which allot then decodes strictly like any other
// body.
func protobufToJSON(body []byte) ([]byte, error) {
	obj, _, err := protoSerializer.Decode(body, nil, nil)
	if err != nil {
		return nil, apierrors.NewBadRequest("decode " + protobufType + " body: " + err.Error())
	}
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	return data, nil
}
