package apiserver

import (
	"encoding/json"
	"net/http"
	"strings"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// wantsMetadata reports whether the client asked for PartialObjectMetadata
// (client-go's metadata client and metadata informers do).
func wantsMetadata(r *http.Request) bool {
	return strings.Contains(r.Header.Get("Accept"), "as=PartialObjectMetadata")
}

// metadataJSON renders stored objects as PartialObjectMetadata, or a
// PartialObjectMetadataList when list is set.
func metadataJSON(k *kind, items []listed, rev, cont string, list bool) ([]byte, error) {
	out := make([]metav1.PartialObjectMetadata, 0, len(items))
	for _, it := range items {
		// Metadata is the same in both versions of a kind with a sibling:
		// decode in the stored version, without building the view.
		obj, sk, err := decodeNative(k, it.value, it.rev)
		if err != nil {
			return nil, err
		}
		acc, err := meta.Accessor(obj)
		if err != nil {
			return nil, err
		}
		om := objectMetaOf(acc)
		if sk != k {
			markView(om, sk)
		}
		out = append(out, metav1.PartialObjectMetadata{
			TypeMeta:   metav1.TypeMeta{Kind: "PartialObjectMetadata", APIVersion: "meta.k8s.io/v1"},
			ObjectMeta: *om,
		})
	}
	if !list {
		return json.Marshal(&out[0])
	}
	l := metav1.PartialObjectMetadataList{
		TypeMeta: metav1.TypeMeta{Kind: "PartialObjectMetadataList", APIVersion: "meta.k8s.io/v1"},
		ListMeta: metav1.ListMeta{ResourceVersion: rev, Continue: cont},
		Items:    out,
	}
	return json.Marshal(&l)
}
