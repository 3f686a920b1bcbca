package main

// The API resources the simulator serves: the kinds the operator watches, the ones it writes
// (FabricCapabilities, Events, Leases), the ones it looks up (Jobs, ReplicaSets, claims) and
// the ones the benchmarks create (Namespaces). A path to anything else is a 404, as on an API
// server that does not serve the resource.

import "encoding/json"

type Kind struct {
	Group    string
	Version  string
	Resource string // plural, as in the path
	Name     string // the kind, as in "kind"
	// Namespaced kinds are listed per namespace or across all of them.
	Namespaced bool
	// Built-in kinds (not CRDs) leave kind and apiVersion out of list items, as the API server
	// does; watch events and single objects carry them.
	BuiltIn bool
	// A status subresource: create ignores status, PATCH/PUT of the object ignore it, and
	// /status changes nothing but it.
	StatusSubresource bool
	// Counted and acknowledged, never stored or watched (Events: the operator only sends them).
	CountOnly bool
	// metadata.generation starts at 1 and follows changes outside metadata and status (CRDs,
	// and the built-in kinds with a generation).
	Generation bool
	// The status an object of a kind with a status subresource is served with until its
	// status is written (a CRD's structural default for status: --status-default); nil: none.
	StatusDefault json.RawMessage
}

func (k *Kind) APIVersion() string {
	if k.Group == "" {
		return k.Version
	}
	return k.Group + "/" + k.Version
}

// GroupResource as the API server names it in messages: "nodes", "daemonsets.apps".
func (k *Kind) GroupResource() string {
	if k.Group == "" {
		return k.Resource
	}
	return k.Resource + "." + k.Group
}

// The bytes watch events and single objects carry in front of a stored body.
func (k *Kind) typeMeta() []byte {
	if !k.BuiltIn {
		return nil // a custom resource keeps kind and apiVersion in its stored body
	}
	return []byte(`"kind":"` + k.Name + `","apiVersion":"` + k.APIVersion() + `",`)
}

var servedKinds = []*Kind{
	{Version: "v1", Resource: "nodes", Name: "Node", BuiltIn: true, StatusSubresource: true},
	{Version: "v1", Resource: "pods", Name: "Pod", Namespaced: true, BuiltIn: true, StatusSubresource: true, Generation: true},
	{Version: "v1", Resource: "namespaces", Name: "Namespace", BuiltIn: true, StatusSubresource: true},
	{Version: "v1", Resource: "events", Name: "Event", Namespaced: true, BuiltIn: true, CountOnly: true},
	{Group: "apps", Version: "v1", Resource: "daemonsets", Name: "DaemonSet", Namespaced: true, BuiltIn: true, StatusSubresource: true, Generation: true},
	{Group: "apps", Version: "v1", Resource: "replicasets", Name: "ReplicaSet", Namespaced: true, BuiltIn: true, StatusSubresource: true, Generation: true},
	{Group: "batch", Version: "v1", Resource: "jobs", Name: "Job", Namespaced: true, BuiltIn: true, StatusSubresource: true, Generation: true},
	{Group: "coordination.k8s.io", Version: "v1", Resource: "leases", Name: "Lease", Namespaced: true, BuiltIn: true},
	{Group: "resource.k8s.io", Version: "v1", Resource: "resourceslices", Name: "ResourceSlice", BuiltIn: true, Generation: true},
	{Group: "resource.k8s.io", Version: "v1", Resource: "deviceclasses", Name: "DeviceClass", BuiltIn: true, Generation: true},
	{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaims", Name: "ResourceClaim", Namespaced: true, BuiltIn: true, StatusSubresource: true},
	{Group: "resource.k8s.io", Version: "v1", Resource: "resourceclaimtemplates", Name: "ResourceClaimTemplate", Namespaced: true, BuiltIn: true},
	{Group: "fabriccap.dev", Version: "v1alpha1", Resource: "fabriccapabilities", Name: "FabricCapability", StatusSubresource: true, Generation: true},
}

type groupVersionResource struct{ group, version, resource string }

var kindsByPath = func() map[groupVersionResource]*Kind {
	byPath := map[groupVersionResource]*Kind{}
	for _, kind := range servedKinds {
		byPath[groupVersionResource{kind.Group, kind.Version, kind.Resource}] = kind
	}
	return byPath
}()

func kindByResource(resource string) *Kind {
	for _, kind := range servedKinds {
		if kind.Resource == resource {
			return kind
		}
	}
	return nil
}
