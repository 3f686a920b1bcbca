package main

// Objects are stored as templates with holes, not as decoded documents: a million pods of a
// few shapes cost their names and a few values each, and serving one is copying bytes. An
// object created through the API is a template of its own whose only hole is its
// resourceVersion. Objects are immutable: a change makes a new *Object, so a LIST snapshot or
// a watch event can hold the version it saw without copying it.

import (
	"bytes"
	"fmt"
	"hash/fnv"
	"strconv"
)

// Holes a template may have besides its own variables (@@NAME@@ in the template text).
const (
	holeVar = iota
	holeRV
	holeUID
	holeName
	holeNamespace
	holeCreated
	holeNode
	holeSerial
)

var specialHoles = map[string]int{
	"RV":        holeRV,
	"UID":       holeUID,
	"NAME":      holeName,
	"NAMESPACE": holeNamespace,
	"CREATED":   holeCreated,
	"NODE":      holeNode,
	"SERIAL":    holeSerial,
}

type hole struct {
	kind  int
	index int // into Object.Vars, for holeVar
}

// Template is an object's JSON without its opening brace, cut at its holes: segments[0],
// hole 0, segments[1], ... The opening brace and, for watch events and single objects of
// built-in kinds, the type fields are written in front of it.
type Template struct {
	Name     string
	Kind     *Kind
	segments [][]byte
	holes    []hole
	VarNames []string // the variables' names, in Object.Vars order
	// A Node's topology.kubernetes.io labels, which pods bound to it are given.
	topology map[string]string
}

func (t *Template) varIndex(name string) int {
	for index, known := range t.VarNames {
		if known == name {
			return index
		}
	}
	return -1
}

// compileTemplate cuts a body ("{...}") at its @@NAME@@ markers. A marker quoted with a hash
// ("@@#NAME@@", quotes included) is a number: its quotes are dropped. With onlyRV, only
// @@RV@@ is a hole (a body created through the API: its content is never read as markers).
func compileTemplate(name string, kind *Kind, body []byte, onlyRV bool) (*Template, error) {
	if len(body) < 2 || body[0] != '{' {
		return nil, fmt.Errorf("template %s: not a JSON object", name)
	}
	text := body[1:]
	template := &Template{Name: name, Kind: kind}
	variables := map[string]int{}
	var current []byte
	for {
		start := bytes.Index(text, []byte("@@"))
		if start < 0 {
			break
		}
		end := bytes.Index(text[start+2:], []byte("@@"))
		if end < 0 {
			break
		}
		marker := string(text[start+2 : start+2+end])
		after := start + 2 + end + 2
		numeric := false
		if len(marker) > 0 && marker[0] == '#' {
			numeric, marker = true, marker[1:]
		}
		if onlyRV && marker != "RV" || !validMarker(marker) {
			current = append(current, text[:after]...)
			text = text[after:]
			continue
		}
		before := text[:start]
		if numeric {
			if start < 1 || text[start-1] != '"' || after >= len(text) || text[after] != '"' {
				return nil, fmt.Errorf("template %s: @@#%s@@ must be a whole quoted string", name, marker)
			}
			before = text[:start-1] // drop the opening quote
			after++                 // and the closing one
		}
		current = append(current, before...)
		template.segments = append(template.segments, current)
		current = nil
		if special, ok := specialHoles[marker]; ok {
			template.holes = append(template.holes, hole{kind: special})
		} else {
			index, seen := variables[marker]
			if !seen {
				index = len(template.VarNames)
				variables[marker] = index
				template.VarNames = append(template.VarNames, marker)
			}
			template.holes = append(template.holes, hole{kind: holeVar, index: index})
		}
		text = text[after:]
	}
	template.segments = append(template.segments, append(current, text...))
	return template, nil
}

func validMarker(marker string) bool {
	if marker == "" || len(marker) > 32 {
		return false
	}
	for _, r := range marker {
		if !(r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '_') {
			return false
		}
	}
	return true
}

type Object struct {
	Name      string
	Namespace string
	NodeName  string // spec.nodeName (pods), for the field selector
	RV        uint64
	Serial    uint64 // creation order: the UID and providerID of templated objects
	Created   string // creationTimestamp, RFC 3339
	Template  *Template
	Vars      []string
}

func (o *Object) Key() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// withVars is a copy with some variables changed (a heartbeat, a count): same identity.
func (o *Object) withVars(changes map[int]string) *Object {
	changed := *o
	changed.Vars = append([]string(nil), o.Vars...)
	for index, value := range changes {
		changed.Vars[index] = value
	}
	return &changed
}

func (o *Object) varValue(name string) (string, bool) {
	index := o.Template.varIndex(name)
	if index < 0 {
		return "", false
	}
	return o.Vars[index], true
}

// appendJSON writes the object as the API server serves it: with kind and apiVersion in
// watch events and single responses (typed), without them in list items of built-in kinds.
func (o *Object) appendJSON(dst []byte, typed bool) []byte {
	dst = append(dst, '{')
	if typed {
		dst = append(dst, o.Template.Kind.typeMeta()...)
	}
	template := o.Template
	for index, segment := range template.segments {
		dst = append(dst, segment...)
		if index == len(template.holes) {
			break
		}
		switch hole := template.holes[index]; hole.kind {
		case holeVar:
			dst = append(dst, o.Vars[hole.index]...)
		case holeRV:
			dst = strconv.AppendUint(dst, o.RV, 10)
		case holeUID:
			dst = appendUID(dst, o.Key(), o.Serial)
		case holeName:
			dst = append(dst, o.Name...)
		case holeNamespace:
			dst = append(dst, o.Namespace...)
		case holeCreated:
			dst = append(dst, o.Created...)
		case holeNode:
			dst = append(dst, o.NodeName...)
		case holeSerial:
			dst = fmt.Appendf(dst, "%017x", o.Serial)
		}
	}
	return dst
}

func (o *Object) JSON(typed bool) []byte {
	return o.appendJSON(make([]byte, 0, 4096), typed)
}

// appendUID derives a stable UID from the key and creation serial (a templated object has no
// stored UID: storing 36 bytes for each of a million pods is what templates avoid).
func appendUID(dst []byte, key string, serial uint64) []byte {
	first := fnv.New64a()
	first.Write([]byte(key))
	high := first.Sum64()
	second := fnv.New64()
	fmt.Fprintf(second, "%d/%s", serial, key)
	low := second.Sum64()
	return fmt.Appendf(dst, "%08x-%04x-4%03x-8%03x-%012x",
		uint32(high>>32), uint16(high>>16), uint16(high)&0xfff, uint16(low>>48)&0xfff, low&0xffffffffffff)
}
