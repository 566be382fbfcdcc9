package apiserver

import (
	"encoding/json"
	"errors"
	"net/http"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"allot.dev/allot/internal/storage"
)

// ReasonInsufficientStorage is the Status reason of a write refused
// because etcd has no space (HTTP 507).
const ReasonInsufficientStorage metav1.StatusReason = "InsufficientStorage"

// noSpaceError is the answer to a write etcd cannot take for want of
// space: 507 Insufficient Storage, with a message naming the condition
// and saying that reads are still served. Clients and components retry.
func noSpaceError(err error) error {
	msg := err.Error()
	var ns *storage.NoSpaceError
	if errors.As(err, &ns) {
		msg = ns.Error()
	}
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status:  metav1.StatusFailure,
		Code:    http.StatusInsufficientStorage,
		Reason:  ReasonInsufficientStorage,
		Message: msg + "; reads are still served",
	}}
}

// writeError answers with a metav1.Status. Errors that are not API status
// errors are internal errors.
func writeError(w http.ResponseWriter, err error) {
	var se apierrors.APIStatus
	switch {
	case errors.As(err, &se):
	case errors.Is(err, storage.ErrNoSpace):
		se = noSpaceError(err).(apierrors.APIStatus)
	default:
		se = apierrors.NewInternalError(err)
	}
	st := se.Status()
	st.Kind, st.APIVersion = "Status", "v1"
	if st.Code == 0 {
		st.Code = http.StatusInternalServerError
	}
	writeJSON(w, int(st.Code), &st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		http.Error(w, err.Error(), http.StatusInternalServerError)
		return
	}
	writeRawJSON(w, code, data)
}

func writeRawJSON(w http.ResponseWriter, code int, data []byte) {
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	_, _ = w.Write(data)
}

func statusSuccess(details *metav1.StatusDetails) *metav1.Status {
	return &metav1.Status{
		TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"},
		Status:   metav1.StatusSuccess,
		Code:     http.StatusOK,
		Details:  details,
	}
}
