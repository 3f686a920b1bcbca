package main

// The world the simulator starts with, written by the Python side from the demo world's
// builders (fabriccap_devtools.scalesim.world): templates with @@VAR@@ holes, groups of
// objects made from one template (a name each, the variables' values), and plain objects
// created as a client would create them (a DaemonSet, a DeviceClass).
//
// A template is stored as the API server would store such an object: server metadata,
// defaults (Pods), and managedFields for its managers, so served bodies are as large as a
// real cluster's.

import (
	"encoding/json"
	"fmt"
	"os"
	"time"
)

type templateSpec struct {
	Name     string          `json:"name"`
	Resource string          `json:"resource"`
	Body     json.RawMessage `json:"body"`
	Manager  string          `json:"manager"`  // the creator's managedFields entry ("" for none)
	StatusBy string          `json:"statusBy"` // the status writer's entry, subresource status
	StatusAt string          `json:"statusAt"` // its time: a hole such as @@HB@@ (default @@CREATED@@)
}

type groupSpec struct {
	Template  string                     `json:"template"`
	Namespace string                     `json:"namespace"`
	Names     []string                   `json:"names"`
	Nodes     []string                   `json:"nodes"` // spec.nodeName per object (pods), or none
	Vars      map[string]json.RawMessage `json:"vars"`  // a string for all, or a list: one each
}

type objectSpec struct {
	Resource string          `json:"resource"`
	Body     json.RawMessage `json:"body"`
}

type worldSpec struct {
	Templates []templateSpec `json:"templates"`
	Groups    []groupSpec    `json:"groups"`
	Objects   []objectSpec   `json:"objects"`
}

func compileWorldTemplate(spec templateSpec) (*Template, error) {
	kind := kindByResource(spec.Resource)
	if kind == nil || kind.CountOnly {
		return nil, fmt.Errorf("template %s: resource %q is not served", spec.Name, spec.Resource)
	}
	body, err := decodeDocument(spec.Body)
	if err != nil {
		return nil, fmt.Errorf("template %s: %v", spec.Name, err)
	}
	metadata := childMap(body, "metadata")
	metadata["name"] = "@@NAME@@"
	if kind.Namespaced {
		metadata["namespace"] = "@@NAMESPACE@@"
	}
	if _, given := metadata["uid"]; !given {
		metadata["uid"] = "@@UID@@" // a template may name its own (a Job: the uid its pods' owner references name)
	}
	metadata["creationTimestamp"] = "@@CREATED@@"
	if kind.Generation {
		metadata["generation"] = jsonNumber(1)
	}
	if kind.Resource == "pods" {
		defaultPod(body)
	}
	if spec.Manager != "" {
		recordManager(body, spec.Manager, kind.APIVersion(), "", "@@CREATED@@", managedFieldsOf(body, false, spec.StatusBy != ""))
	}
	switch kind.Resource {
	case "pods":
		admitPod(body, nil, true)
	case "nodes":
		admitNode(body)
	}
	if _, hasStatus := body["status"]; hasStatus && spec.StatusBy != "" {
		when := spec.StatusAt
		if when == "" {
			when = "@@CREATED@@"
		}
		recordManager(body, spec.StatusBy, kind.APIVersion(), "status", when, managedFieldsOf(body, true, false))
	}
	metadata["resourceVersion"] = "@@RV@@"
	if kind.BuiltIn {
		delete(body, "kind")
		delete(body, "apiVersion")
	} else {
		body["kind"], body["apiVersion"] = kind.Name, kind.APIVersion()
	}
	template, err := compileTemplate(spec.Name, kind, encodeDocument(body), false)
	if err != nil {
		return nil, err
	}
	if kind.Resource == "nodes" {
		template.topology = topologyOf(body)
	}
	return template, nil
}

func groupValues(group groupSpec, name string, count int) ([]string, error) {
	raw, ok := group.Vars[name]
	if !ok {
		return nil, fmt.Errorf("group of %s: no value for @@%s@@", group.Template, name)
	}
	var single string
	if json.Unmarshal(raw, &single) == nil {
		values := make([]string, count)
		for index := range values {
			values[index] = single
		}
		return values, nil
	}
	var each []string
	if err := json.Unmarshal(raw, &each); err != nil || len(each) != count {
		return nil, fmt.Errorf("group of %s: @@%s@@ needs a string or %d strings", group.Template, name, count)
	}
	return each, nil
}

// loadWorld fills the store before the server starts: no events, the loaded state is where
// every kind's history begins.
func (s *Server) loadWorld(path string, templates map[string]*Template) error {
	raw, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	var spec worldSpec
	if err := json.Unmarshal(raw, &spec); err != nil {
		return fmt.Errorf("%s: %v", path, err)
	}
	raw = nil
	for _, templateSpec := range spec.Templates {
		template, err := compileWorldTemplate(templateSpec)
		if err != nil {
			return err
		}
		templates[templateSpec.Name] = template
	}
	now := time.Now()
	created := now.UTC().Format(time.RFC3339)
	interned := map[string]string{}
	intern := func(value string) string {
		if known, ok := interned[value]; ok {
			return known
		}
		interned[value] = value
		return value
	}
	for _, group := range spec.Groups {
		template := templates[group.Template]
		if template == nil {
			return fmt.Errorf("a group names template %q, which the world does not define", group.Template)
		}
		count := len(group.Names)
		if group.Nodes != nil && len(group.Nodes) != count {
			return fmt.Errorf("group of %s: %d names but %d nodes", group.Template, count, len(group.Nodes))
		}
		columns := make([][]string, len(template.VarNames))
		for index, name := range template.VarNames {
			if columns[index], err = groupValues(group, name, count); err != nil {
				return err
			}
		}
		backing := make([]string, count*len(columns))
		for row, name := range group.Names {
			vars := backing[row*len(columns) : (row+1)*len(columns) : (row+1)*len(columns)]
			for column := range columns {
				vars[column] = intern(columns[column][row])
			}
			object := &Object{
				Name: name, Namespace: intern(group.Namespace), Serial: s.store.nextSerial(),
				Created: created, Template: template, Vars: vars,
			}
			if group.Nodes != nil {
				object.NodeName = intern(group.Nodes[row])
			}
			s.store.load(object)
		}
	}
	for _, objectSpec := range spec.Objects {
		kind := kindByResource(objectSpec.Resource)
		if kind == nil {
			return fmt.Errorf("an object of resource %q, which is not served", objectSpec.Resource)
		}
		body, err := decodeDocument(objectSpec.Body)
		if err != nil {
			return err
		}
		namespace, _ := childMap(body, "metadata")["namespace"].(string)
		if _, failure := s.createDocument(kind, namespace, body, "scalesim-world", now); failure != nil {
			return fmt.Errorf("%s: %s", objectSpec.Resource, failure.Message)
		}
	}
	s.store.finishLoading()
	return nil
}
