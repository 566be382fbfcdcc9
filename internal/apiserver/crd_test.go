package apiserver

import (
	"testing"
	"time"
)

const cardCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"cardparameters.dra.example.com"},
 "spec":{"group":"dra.example.com","scope":"Namespaced",
  "names":{"kind":"CardParameters","plural":"cardparameters","singular":"cardparameters"},
  "versions":[{"name":"v1alpha1","served":true,"storage":true,
   "additionalPrinterColumns":[{"name":"Count","type":"integer","jsonPath":".spec.count"}],
   "schema":{"openAPIV3Schema":{"type":"object","properties":{"spec":{"type":"object","properties":{
     "count":{"type":"integer","minimum":1},"sharing":{"type":"object","properties":{"strategy":{"type":"string"}}}}}}}}}]}}`

func TestCustomResources(t *testing.T) {
	ns := newNamespace(t)
	expect(t, admin(t, "POST", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions", cardCRD), 201, `"Established"`)
	path := "/apis/dra.example.com/v1alpha1/namespaces/" + ns + "/cardparameters"
	// Served at once: a custom resource can follow its CRD in one apply.
	expect(t, admin(t, "POST", path, `{"apiVersion":"dra.example.com/v1alpha1","kind":"CardParameters","metadata":{"name":"ok"},"spec":{"count":2}}`), 201)
	expect(t, admin(t, "POST", path, `{"apiVersion":"dra.example.com/v1alpha1","kind":"CardParameters","metadata":{"name":"bad"},"spec":{"count":0}}`), 422, "spec.count")
	expect(t, admin(t, "POST", path, `{"apiVersion":"dra.example.com/v1alpha1","kind":"CardParameters","metadata":{"name":"bad2"},"spec":{"count":1,"colour":"red"}}`), 422, "spec.colour")
	expect(t, admin(t, "GET", path, nil, "Accept", "application/json;as=Table;v=v1;g=meta.k8s.io"), 200, `"Count"`, `"2"`)
	expect(t, admin(t, "GET", "/apis/dra.example.com/v1alpha1", nil), 200, `"cardparameters"`)
	expect(t, admin(t, "GET", "/openapi/v3/apis/dra.example.com/v1alpha1", nil), 200, `"CardParameters"`, "fieldValidation")

	// Deleting the CRD stops serving the kind and removes its objects.
	expect(t, admin(t, "DELETE", "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/cardparameters.dra.example.com", nil), 200)
	deadline := time.Now().Add(20 * time.Second)
	for admin(t, "GET", path+"/ok", nil).code != 404 {
		if time.Now().After(deadline) {
			t.Fatal("custom resource still served after its CRD was deleted")
		}
		time.Sleep(50 * time.Millisecond)
	}
}
