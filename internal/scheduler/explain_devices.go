package scheduler

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	resourcev1 "k8s.io/api/resource/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	corev1 "allot.dev/allot/api/core/v1"
	resourcev1alpha2 "allot.dev/allot/api/resource/v1alpha2"
	"allot.dev/allot/pkg/client"
)

// Device states of a DeviceReport, from what the driver wrote in the
// claim's status.devices.
const (
	// DeviceReady: the driver's Ready condition is True and no binding
	// condition is outstanding.
	DeviceReady = "ready"
	// DeviceBinding: a binding condition of the allocation is not True yet
	// (the pod waits for the device before it is bound).
	DeviceBinding = "binding"
	// DeviceFailing: the driver reports Ready=False, or a binding failure
	// condition of the allocation is True.
	DeviceFailing = "failing"
	// DeviceUnreported: the driver wrote nothing about the device.
	DeviceUnreported = "unreported"
)

// DeviceReport is one device allocated to one of a pod's resource.k8s.io/v1
// claims, with what its driver reports about it (the claim's
// status.devices entry for it, matched by driver, pool, device and share).
type DeviceReport struct {
	Claim   string `json:"claim"`
	Request string `json:"request"`
	Driver  string `json:"driver"`
	Pool    string `json:"pool"`
	Device  string `json:"device"`
	ShareID string `json:"shareID,omitempty"`
	// State is DeviceReady, DeviceBinding, DeviceFailing or
	// DeviceUnreported; Why says which conditions made it so.
	State string `json:"state"`
	Why   string `json:"why,omitempty"`
	// Conditions are the driver's, as "Type=Status (Reason)".
	Conditions []string `json:"conditions,omitempty"`
	// Interface, IPs and HardwareAddress are the driver's networkData.
	Interface       string   `json:"interface,omitempty"`
	IPs             []string `json:"ips,omitempty"`
	HardwareAddress string   `json:"hardwareAddress,omitempty"`
	// Data is the driver's opaque data, as compact JSON.
	Data string `json:"data,omitempty"`
}

// PodDevices reads the pod's resource.k8s.io/v1 claims (those written as
// v1alpha2 have no device status and are left out, as are claims not
// allocated or not found) and reports each allocated device. Each Get has
// its own timeout.
func PodDevices(ctx context.Context, c *client.Client, pod *corev1.Pod, timeout time.Duration) ([]DeviceReport, error) {
	var out []DeviceReport
	for _, name := range pod.ResourceClaimNames() {
		gctx, cancel := context.WithTimeout(ctx, timeout)
		claim, err := c.ResourceClaimsV1(pod.Namespace).Get(gctx, name)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			continue
		case err != nil:
			return nil, fmt.Errorf("get resource claim %s/%s: %w", pod.Namespace, name, err)
		}
		out = append(out, podClaimReports(claim)...)
	}
	return out, nil
}

// PodDevicesOf is PodDevices over claims already read, by namespace and
// name (a List), for explaining many pods at once.
func PodDevicesOf(pod *corev1.Pod, claims map[string]*resourcev1.ResourceClaim) []DeviceReport {
	var out []DeviceReport
	for _, name := range pod.ResourceClaimNames() {
		if claim := claims[pod.Namespace+"/"+name]; claim != nil {
			out = append(out, podClaimReports(claim)...)
		}
	}
	return out
}

func podClaimReports(claim *resourcev1.ResourceClaim) []DeviceReport {
	if resourcev1alpha2.IsView(claim) {
		return nil
	}
	return ClaimDeviceReports(claim)
}

// ClaimDeviceReports reports each device allocated to claim.
func ClaimDeviceReports(claim *resourcev1.ResourceClaim) []DeviceReport {
	a := claim.Status.Allocation
	if a == nil {
		return nil
	}
	var out []DeviceReport
	for _, r := range a.Devices.Results {
		rep := DeviceReport{Claim: claim.Name, Request: r.Request, Driver: r.Driver, Pool: r.Pool, Device: r.Device}
		if r.ShareID != nil {
			rep.ShareID = string(*r.ShareID)
		}
		st := deviceStatusOf(claim.Status.Devices, &r)
		if st != nil {
			for _, c := range st.Conditions {
				s := c.Type + "=" + string(c.Status)
				if c.Reason != "" {
					s += " (" + c.Reason + ")"
				}
				rep.Conditions = append(rep.Conditions, s)
			}
			if n := st.NetworkData; n != nil {
				rep.Interface, rep.IPs, rep.HardwareAddress = n.InterfaceName, n.IPs, n.HardwareAddress
			}
			if st.Data != nil && len(st.Data.Raw) > 0 {
				rep.Data = compactJSON(st.Data.Raw)
			}
		}
		rep.State, rep.Why = deviceState(st, &r)
		out = append(out, rep)
	}
	return out
}

func deviceStatusOf(ds []resourcev1.AllocatedDeviceStatus, r *resourcev1.DeviceRequestAllocationResult) *resourcev1.AllocatedDeviceStatus {
	for i := range ds {
		d := &ds[i]
		if d.Driver != r.Driver || d.Pool != r.Pool || d.Device != r.Device {
			continue
		}
		if (d.ShareID == nil) != (r.ShareID == nil) || (d.ShareID != nil && *d.ShareID != string(*r.ShareID)) {
			continue
		}
		return d
	}
	return nil
}

// deviceState judges one device: a True binding failure condition or
// Ready=False is failing; a binding condition not True is binding; else
// Ready=True is ready, and no status at all is unreported.
func deviceState(st *resourcev1.AllocatedDeviceStatus, r *resourcev1.DeviceRequestAllocationResult) (string, string) {
	var conds []metav1.Condition
	if st != nil {
		conds = st.Conditions
	}
	for _, f := range r.BindingFailureConditions {
		if c := findCondition(conds, f); c != nil && c.Status == metav1.ConditionTrue {
			return DeviceFailing, "binding failure condition " + f + " is True" + conditionDetail(c)
		}
	}
	if c := findCondition(conds, "Ready"); c != nil && c.Status == metav1.ConditionFalse {
		return DeviceFailing, "Ready is False" + conditionDetail(c)
	}
	var waiting []string
	for _, b := range r.BindingConditions {
		if c := findCondition(conds, b); c == nil || c.Status != metav1.ConditionTrue {
			waiting = append(waiting, b)
		}
	}
	if len(waiting) > 0 {
		return DeviceBinding, "waiting for binding condition " + strings.Join(waiting, ", ")
	}
	if st == nil {
		return DeviceUnreported, ""
	}
	if c := findCondition(conds, "Ready"); c != nil && c.Status == metav1.ConditionTrue {
		return DeviceReady, ""
	}
	return DeviceUnreported, "no Ready condition"
}

func findCondition(conds []metav1.Condition, t string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == t {
			return &conds[i]
		}
	}
	return nil
}

func conditionDetail(c *metav1.Condition) string {
	switch {
	case c.Reason != "" && c.Message != "":
		return ": " + c.Reason + ": " + c.Message
	case c.Reason != "":
		return ": " + c.Reason
	case c.Message != "":
		return ": " + c.Message
	}
	return ""
}

func compactJSON(raw []byte) string {
	var b strings.Builder
	var v any
	if err := json.Unmarshal(raw, &v); err != nil {
		return string(raw)
	}
	enc := json.NewEncoder(&b)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return string(raw)
	}
	return strings.TrimSpace(b.String())
}

// WriteBindingWait writes, for a pending pod with devices whose binding
// conditions are not all True (its claims allocated by the first step of
// its binding), that the pod waits for them before it is bound.
func WriteBindingWait(w io.Writer, pod *corev1.Pod, reports []DeviceReport) error {
	if pod.Spec.NodeName != "" {
		return nil
	}
	var waits []string
	for _, r := range reports {
		if r.State == DeviceBinding {
			waits = append(waits, fmt.Sprintf("claim %s device %s/%s/%s (%s)", r.Claim, r.Driver, r.Pool, r.Device, r.Why))
		}
	}
	if len(waits) == 0 {
		return nil
	}
	_, err := fmt.Fprintf(w, "Waiting:    the claims are allocated; the pod is bound once its devices' binding conditions are True: waiting for binding conditions of %s\n",
		strings.Join(waits, "; "))
	return err
}

// WriteDevices prints the devices of a pod's claims, one row per device,
// with the driver's conditions, network data and data on the rows below
// it. Nothing is printed when there are none.
func WriteDevices(w io.Writer, reports []DeviceReport) error {
	if len(reports) == 0 {
		return nil
	}
	ew := &errWriter{w: w}
	ew.printf("\nDevices of the pod's claims (as their drivers report them):\n")
	tw := tabwriter.NewWriter(ew, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "CLAIM\tREQUEST\tDEVICE\tSTATE\tCONDITIONS")
	for _, r := range reports {
		dev := r.Driver + "/" + r.Pool + "/" + r.Device
		if r.ShareID != "" {
			dev += " (share " + r.ShareID + ")"
		}
		state := r.State
		if r.Why != "" {
			state += ": " + r.Why
		}
		conds := strings.Join(r.Conditions, ", ")
		if conds == "" {
			conds = "<none>"
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\n", r.Claim, r.Request, dev, oneLine(state), oneLine(conds))
	}
	if err := tw.Flush(); err != nil && ew.err == nil {
		ew.err = err
	}
	for _, r := range reports {
		if r.Interface == "" && len(r.IPs) == 0 && r.HardwareAddress == "" && r.Data == "" {
			continue
		}
		ew.printf("  %s/%s/%s:", r.Driver, r.Pool, r.Device)
		if r.Interface != "" {
			ew.printf(" interface %s", r.Interface)
		}
		if len(r.IPs) > 0 {
			ew.printf(" ips %s", strings.Join(r.IPs, ","))
		}
		if r.HardwareAddress != "" {
			ew.printf(" mac %s", r.HardwareAddress)
		}
		if r.Data != "" {
			ew.printf(" data %s", r.Data)
		}
		ew.printf("\n")
	}
	return ew.err
}
