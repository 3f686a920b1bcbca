package main

// Discovery (/api, /apis, /api/v1, /apis/<group>/<version>): what kopf reads when it starts,
// listing the served kinds the way the API server's legacy discovery documents do.

import (
	"net/http"
	"sort"
	"strings"
)

type groupVersion struct{ group, version string }

func (k *Kind) groupVersion() groupVersion { return groupVersion{k.Group, k.Version} }

func (s *Server) discovery(w http.ResponseWriter, request *http.Request) bool {
	path := strings.TrimSuffix(request.URL.Path, "/")
	switch {
	case path == "/api":
		writeJSON(w, http.StatusOK, map[string]any{
			"kind": "APIVersions", "versions": []string{"v1"},
			"serverAddressByClientCIDRs": []map[string]string{{"clientCIDR": "0.0.0.0/0", "serverAddress": request.Host}},
		})
		return true
	case path == "/apis":
		byGroup := map[string][]string{}
		for _, kind := range servedKinds {
			if kind.Group != "" && !containsString(byGroup[kind.Group], kind.Version) {
				byGroup[kind.Group] = append(byGroup[kind.Group], kind.Version)
			}
		}
		names := make([]string, 0, len(byGroup))
		for name := range byGroup {
			names = append(names, name)
		}
		sort.Strings(names)
		groups := []map[string]any{}
		for _, name := range names {
			versions := []map[string]string{}
			for _, version := range byGroup[name] {
				versions = append(versions, map[string]string{"groupVersion": name + "/" + version, "version": version})
			}
			groups = append(groups, map[string]any{"name": name, "versions": versions, "preferredVersion": versions[0]})
		}
		writeJSON(w, http.StatusOK, map[string]any{"kind": "APIGroupList", "apiVersion": "v1", "groups": groups})
		return true
	}
	var wanted groupVersion
	parts := strings.Split(strings.Trim(path, "/"), "/")
	switch {
	case len(parts) == 2 && parts[0] == "api":
		wanted = groupVersion{"", parts[1]}
	case len(parts) == 3 && parts[0] == "apis":
		wanted = groupVersion{parts[1], parts[2]}
	default:
		return false
	}
	resources := []map[string]any{}
	for _, kind := range servedKinds {
		if kind.groupVersion() != wanted {
			continue
		}
		verbs := []string{"create", "delete", "get", "list", "patch", "update", "watch"}
		resources = append(resources, map[string]any{
			"name": kind.Resource, "singularName": strings.ToLower(kind.Name), "namespaced": kind.Namespaced,
			"kind": kind.Name, "verbs": verbs,
		})
		if kind.StatusSubresource {
			resources = append(resources, map[string]any{
				"name": kind.Resource + "/status", "singularName": "", "namespaced": kind.Namespaced,
				"kind": kind.Name, "verbs": []string{"get", "patch", "update"},
			})
		}
	}
	if len(resources) == 0 {
		return false
	}
	groupVersionText := wanted.version
	if wanted.group != "" {
		groupVersionText = wanted.group + "/" + wanted.version
	}
	writeJSON(w, http.StatusOK, map[string]any{
		"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": groupVersionText, "resources": resources,
	})
	return true
}

func containsString(values []string, wanted string) bool {
	for _, value := range values {
		if value == wanted {
			return true
		}
	}
	return false
}
