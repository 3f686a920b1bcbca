package main

// What the API server adds to an object it stores, measured on kube-apiserver v1.35.4 (the
// dev control plane) by posting the benchmarks' bodies and reading them back: server
// metadata, managedFields, and a Pod's defaults. Sizes matter here, not field order: a
// served Pod of the workloads benchmark is 3.6 KB against the 1.3 KB posted, a Node 16.4 KB
// against 13.5 KB.

import (
	"bytes"
	"crypto/rand"
	"encoding/json"
	"fmt"
	"maps"
	"reflect"
	"sort"
	"strings"
)

type document = map[string]any

func decodeDocument(data []byte) (document, error) {
	decoder := json.NewDecoder(bytes.NewReader(data))
	decoder.UseNumber()
	var value any
	if err := decoder.Decode(&value); err != nil {
		return nil, err
	}
	object, ok := value.(document)
	if !ok {
		return nil, fmt.Errorf("not a JSON object")
	}
	return object, nil
}

// encodeDocument is compact JSON without HTML escaping (the API server's encoder does not
// escape <, > and & either).
func encodeDocument(value any) []byte {
	var buffer bytes.Buffer
	encoder := json.NewEncoder(&buffer)
	encoder.SetEscapeHTML(false)
	if err := encoder.Encode(value); err != nil {
		panic(err) // only decoded JSON is encoded here
	}
	return bytes.TrimRight(buffer.Bytes(), "\n")
}

func childMap(parent document, key string) document {
	if child, ok := parent[key].(document); ok {
		return child
	}
	child := document{}
	parent[key] = child
	return child
}

func stringAt(parent document, keys ...string) string {
	var current any = parent
	for _, key := range keys {
		object, ok := current.(document)
		if !ok {
			return ""
		}
		current = object[key]
	}
	text, _ := current.(string)
	return text
}

func newUID() string {
	var raw [16]byte
	_, _ = rand.Read(raw[:])
	raw[6] = raw[6]&0x0f | 0x40
	raw[8] = raw[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", raw[0:4], raw[4:6], raw[6:8], raw[8:10], raw[10:16])
}

func randomSuffix() string {
	const letters = "bcdfghjklmnpqrstvwxz2456789" // the API server's generateName alphabet
	var raw [5]byte
	_, _ = rand.Read(raw[:])
	suffix := make([]byte, 5)
	for index, value := range raw {
		suffix[index] = letters[int(value)%len(letters)]
	}
	return string(suffix)
}

// -- managedFields

// Fields whose presence is not an owned field of their own (struct fields that are always
// there): their field sets carry no "." entry.
var alwaysPresent = map[string]bool{"metadata": true, "spec": true, "status": true, "containers": true, "nodeInfo": true}

// Metadata the server owns: never in a manager's field set.
var serverMetadata = map[string]bool{
	"name": true, "namespace": true, "uid": true, "resourceVersion": true, "creationTimestamp": true,
	"generation": true, "managedFields": true, "generateName": true, "selfLink": true,
}

// List items are keyed by the first of these they have (containers and conditions by name
// and type); other lists are atomic. Some lists have keys of their own.
var mergeKeys = []string{"name", "type", "devicePath"}

var listKeys = map[string]string{"ownerReferences": "uid", "volumeMounts": "mountPath", "ports": "containerPort"}

// fieldSet is the FieldsV1 set of the fields a value sets.
func fieldSet(key string, value any, owned bool) document {
	set := document{}
	if owned {
		set["."] = document{}
	}
	switch typed := value.(type) {
	case document:
		for childKey, child := range typed {
			set["f:"+childKey] = childFields(childKey, child)
		}
	case []any:
		for _, item := range typed {
			object, ok := item.(document)
			if !ok {
				continue
			}
			itemKey := listKey(key, object)
			if itemKey == "" {
				continue
			}
			encoded := "k:" + string(encodeDocument(document{itemKey: object[itemKey]}))
			if key == "ownerReferences" {
				set[encoded] = document{} // the API server records owner references by uid alone
			} else {
				set[encoded] = fieldSet("", object, true)
			}
		}
	}
	return set
}

func listKey(listName string, item document) string {
	if key, ok := listKeys[listName]; ok {
		if _, present := item[key]; present {
			return key
		}
		return ""
	}
	for _, key := range mergeKeys {
		if _, present := item[key]; present {
			return key
		}
	}
	return ""
}

func childFields(key string, child any) document {
	switch typed := child.(type) {
	case document:
		if len(typed) == 0 {
			return document{}
		}
		return fieldSet(key, typed, !alwaysPresent[key])
	case []any:
		if len(typed) > 0 {
			if first, ok := typed[0].(document); ok && listKey(key, first) != "" {
				return fieldSet(key, typed, !alwaysPresent[key])
			}
		}
	}
	return document{} // a scalar, or an atomic list
}

// managedFieldsOf is the field set of a body's fields, server metadata left out. With
// statusOnly, only status; else everything but status when withoutStatus.
func managedFieldsOf(body document, statusOnly, withoutStatus bool) document {
	set := document{}
	for key, value := range body {
		switch {
		case key == "apiVersion" || key == "kind":
		case statusOnly && key != "status", !statusOnly && withoutStatus && key == "status":
		case key == "metadata":
			metadata, _ := value.(document)
			kept := document{}
			for field, fieldValue := range metadata {
				if !serverMetadata[field] {
					kept[field] = fieldValue
				}
			}
			if len(kept) > 0 {
				set["f:metadata"] = fieldSet("metadata", kept, false)
			}
		default:
			set["f:"+key] = childFields(key, value)
		}
	}
	return set
}

func unionFields(into, from document) {
	for key, value := range from {
		child, _ := value.(document)
		existing, ok := into[key].(document)
		if !ok {
			into[key] = child
			continue
		}
		unionFields(existing, child)
	}
}

// recordManager adds a write's fields to its manager's entry (one entry per manager,
// operation and subresource, as the API server keeps them), stamped with the write's time.
func recordManager(body document, manager, apiVersion, subresource, when string, fields document) {
	metadata := childMap(body, "metadata")
	entries, _ := metadata["managedFields"].([]any)
	for _, item := range entries {
		entry, ok := item.(document)
		if !ok {
			continue
		}
		entrySubresource, _ := entry["subresource"].(string)
		if entry["manager"] == manager && entry["operation"] == "Update" && entrySubresource == subresource {
			existing := childMap(entry, "fieldsV1")
			unionFields(existing, fields)
			entry["time"] = when
			return
		}
	}
	entry := document{
		"manager": manager, "operation": "Update", "apiVersion": apiVersion, "time": when,
		"fieldsType": "FieldsV1", "fieldsV1": fields,
	}
	if subresource != "" {
		entry["subresource"] = subresource
	}
	metadata["managedFields"] = append(entries, entry)
}

// -- a Pod's defaults, which its creator's managedFields include, then what admission adds
// after (DefaultTolerationSeconds, Priority, PodTopologyLabels) and the status it starts with

func defaultPod(body document) {
	spec := childMap(body, "spec")
	setDefault(spec, "restartPolicy", "Always")
	setDefault(spec, "terminationGracePeriodSeconds", json.Number("30"))
	setDefault(spec, "dnsPolicy", "ClusterFirst")
	setDefault(spec, "securityContext", document{})
	setDefault(spec, "schedulerName", "default-scheduler")
	setDefault(spec, "enableServiceLinks", true)
	for _, listName := range []string{"initContainers", "containers"} {
		containers, _ := spec[listName].([]any)
		for _, item := range containers {
			container, ok := item.(document)
			if !ok {
				continue
			}
			setDefault(container, "terminationMessagePath", "/dev/termination-log")
			setDefault(container, "terminationMessagePolicy", "File")
			image, _ := container["image"].(string)
			if strings.HasSuffix(image, ":latest") || !strings.Contains(image[strings.LastIndex(image, "/")+1:], ":") && !strings.Contains(image, "@") {
				setDefault(container, "imagePullPolicy", "Always")
			} else {
				setDefault(container, "imagePullPolicy", "IfNotPresent")
			}
			if resources, ok := container["resources"].(document); ok {
				if limits, ok := resources["limits"].(document); ok {
					requests := childMap(resources, "requests")
					for name, quantity := range limits {
						setDefault(requests, name, quantity)
					}
				}
			}
			env, _ := container["env"].([]any)
			for _, variable := range env {
				if entry, ok := variable.(document); ok {
					if from, ok := entry["valueFrom"].(document); ok {
						if fieldRef, ok := from["fieldRef"].(document); ok {
							setDefault(fieldRef, "apiVersion", "v1")
						}
					}
				}
			}
		}
	}
}

func admitPod(body document, nodeTopology map[string]string, keepStatus bool) {
	spec := childMap(body, "spec")
	if _, named := spec["priorityClassName"]; !named {
		setDefault(spec, "priority", json.Number("0"))
	}
	setDefault(spec, "preemptionPolicy", "PreemptLowerPriority")
	tolerations, _ := spec["tolerations"].([]any)
	for _, taint := range []string{"node.kubernetes.io/not-ready", "node.kubernetes.io/unreachable"} {
		present := false
		for _, item := range tolerations {
			if toleration, ok := item.(document); ok && toleration["key"] == taint {
				present = true
			}
		}
		if !present {
			tolerations = append(tolerations, document{
				"key": taint, "operator": "Exists", "effect": "NoExecute", "tolerationSeconds": json.Number("300"),
			})
		}
	}
	spec["tolerations"] = tolerations
	if len(nodeTopology) > 0 {
		labels := childMap(childMap(body, "metadata"), "labels")
		for key, value := range nodeTopology {
			setDefault(labels, key, value)
		}
	}
	if !keepStatus {
		body["status"] = document{"phase": "Pending"}
	}
	status := childMap(body, "status")
	setDefault(status, "qosClass", podQOS(spec))
}

// admitNode adds what a new Node gets on creation: the not-ready taint
// (TaintNodesByCondition) and a zero kubelet endpoint in its status.
func admitNode(body document) {
	spec := childMap(body, "spec")
	taints, _ := spec["taints"].([]any)
	for _, item := range taints {
		if taint, ok := item.(document); ok && taint["key"] == "node.kubernetes.io/not-ready" {
			return
		}
	}
	spec["taints"] = append(taints, document{"key": "node.kubernetes.io/not-ready", "effect": "NoSchedule"})
	if status, ok := body["status"].(document); ok {
		endpoints := childMap(status, "daemonEndpoints")
		setDefault(childMap(endpoints, "kubeletEndpoint"), "Port", json.Number("0"))
	}
}

func setDefault(object document, key string, value any) {
	if _, present := object[key]; !present {
		object[key] = value
	}
}

func podQOS(spec document) string {
	containers, _ := spec["containers"].([]any)
	anySet, guaranteed := false, true
	for _, item := range containers {
		container, _ := item.(document)
		resources, _ := container["resources"].(document)
		limits, _ := resources["limits"].(document)
		requests, _ := resources["requests"].(document)
		for _, name := range []string{"cpu", "memory"} {
			limit, hasLimit := limits[name]
			request, hasRequest := requests[name]
			anySet = anySet || hasLimit || hasRequest
			if !hasLimit || hasRequest && !reflect.DeepEqual(limit, request) {
				guaranteed = false
			}
		}
	}
	switch {
	case !anySet:
		return "BestEffort"
	case guaranteed:
		return "Guaranteed"
	default:
		return "Burstable"
	}
}

// topologyOf is a Node's topology.kubernetes.io labels (copied onto pods bound to it).
func topologyOf(body document) map[string]string {
	labels, _ := childMap(body, "metadata")["labels"].(document)
	topology := map[string]string{}
	for key, value := range labels {
		if text, ok := value.(string); ok && strings.HasPrefix(key, "topology.kubernetes.io/") {
			topology[key] = text
		}
	}
	return topology
}

// mergePatch applies an RFC 7386 JSON merge patch (what the operator sends).
func mergePatch(target any, patch any) any {
	patchObject, ok := patch.(document)
	if !ok {
		return patch
	}
	targetObject, ok := target.(document)
	if !ok {
		targetObject = document{}
	}
	for key, value := range patchObject {
		if value == nil {
			delete(targetObject, key)
		} else {
			targetObject[key] = mergePatch(targetObject[key], value)
		}
	}
	return targetObject
}

// withoutKeys is a shallow copy without some top-level keys (to compare what a write changed).
func withoutKeys(body document, keys ...string) document {
	copied := maps.Clone(body)
	for _, key := range keys {
		delete(copied, key)
	}
	return copied
}

func sortedKeys(values map[string]int64) []string {
	keys := make([]string, 0, len(values))
	for key := range values {
		keys = append(keys, key)
	}
	sort.Strings(keys)
	return keys
}
