// Command argocd-health-check runs a resource_customizations health check the way Argo CD
// runs it: with Argo CD's own Lua runner (github.com/argoproj/argo-cd/v3/util/lua), not a
// stand-in interpreter. Each object goes through both routes a cluster can take:
//
//   - builtin: the script shipped inside Argo CD (resource_customizations/<group>/<Kind>/
//     health.lua), which Argo CD runs with the Lua standard libraries open, as its own
//     TestLuaHealthScript does;
//   - configMap: the script from an argocd-cm key resource.customizations.health.<group>_<Kind>,
//     which Argo CD runs through ResourceHealthOverrides without the standard libraries
//     (unless resource.customizations.useOpenLibs.<group>_<Kind> is "true").
//
// Usage:
//
//	argocd-health-check test DIR CONFIGMAP   every case of DIR/health_test.yaml; exit 1 on a mismatch
//	argocd-health-check eval DIR CONFIGMAP   one object (JSON or YAML) on stdin
//
// DIR holds health.lua, health_test.yaml and testdata/; CONFIGMAP is an argocd-cm (patch)
// manifest. Output is JSON on stdout; usage and input errors exit 2 with one line on stderr.
package main

import (
	"encoding/json"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	appv1 "github.com/argoproj/argo-cd/v3/pkg/apis/application/v1alpha1"
	"github.com/argoproj/argo-cd/v3/util/lua"
	"github.com/argoproj/gitops-engine/pkg/health"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/yaml"
)

// The argocd-cm key prefix of a health check, and of its open-libraries switch.
const (
	healthKeyPrefix   = "resource.customizations.health."
	openLibsKeyPrefix = "resource.customizations.useOpenLibs."
)

// Outcome is what one route made of one object: Argo CD's health status, or its error.
type Outcome struct {
	Status  string `json:"status"`
	Message string `json:"message"`
	Error   string `json:"error,omitempty"`
}

// Result is one object through both routes.
type Result struct {
	InputPath string   `json:"inputPath,omitempty"`
	Expected  *Outcome `json:"expected,omitempty"`
	Builtin   Outcome  `json:"builtin"`
	ConfigMap Outcome  `json:"configMap"`
}

// The layout of Argo CD's health_test.yaml (util/lua/health_test.go's TestStructure).
type testFile struct {
	Tests []struct {
		InputPath    string `json:"inputPath"`
		HealthStatus struct {
			Status  string `json:"status"`
			Message string `json:"message"`
		} `json:"healthStatus"`
	} `json:"tests"`
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "error: %v\n", err)
	os.Exit(2)
}

func main() {
	if len(os.Args) != 4 || (os.Args[1] != "test" && os.Args[1] != "eval") {
		fmt.Fprintln(os.Stderr, "usage: argocd-health-check test|eval DIR CONFIGMAP")
		os.Exit(2)
	}
	dir, configMapPath := os.Args[2], os.Args[3]
	script, err := os.ReadFile(filepath.Join(dir, "health.lua"))
	if err != nil {
		fail(err)
	}
	overrides, err := configMapOverrides(configMapPath)
	if err != nil {
		fail(err)
	}
	switch os.Args[1] {
	case "eval":
		raw, err := io.ReadAll(os.Stdin)
		if err != nil {
			fail(fmt.Errorf("reading stdin: %w", err))
		}
		obj, err := decode(raw)
		if err != nil {
			fail(fmt.Errorf("stdin: %w", err))
		}
		writeJSON([]Result{run(obj, string(script), overrides)})
	case "test":
		results, err := runTests(dir, string(script), overrides)
		if err != nil {
			fail(err)
		}
		writeJSON(results)
		for _, result := range results {
			if result.Builtin != *result.Expected || result.ConfigMap != *result.Expected {
				os.Exit(1)
			}
		}
	}
}

func writeJSON(results []Result) {
	out, err := json.MarshalIndent(results, "", "  ")
	if err != nil {
		fail(err)
	}
	fmt.Println(string(out))
}

// configMapOverrides reads the health checks of an argocd-cm manifest as Argo CD's settings
// manager does (util/settings: convertToOverrideKey turns group_Kind into group/Kind).
func configMapOverrides(path string) (lua.ResourceHealthOverrides, error) {
	raw, err := os.ReadFile(path)
	if err != nil {
		return nil, err
	}
	var configMap struct {
		Kind string            `json:"kind"`
		Data map[string]string `json:"data"`
	}
	if err := yaml.Unmarshal(raw, &configMap); err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	if configMap.Kind != "ConfigMap" {
		return nil, fmt.Errorf("%s: kind %q is not ConfigMap", path, configMap.Kind)
	}
	overrides := lua.ResourceHealthOverrides{}
	for key, value := range configMap.Data {
		groupKind, found := strings.CutPrefix(key, healthKeyPrefix)
		if !found {
			continue
		}
		group, kind, found := strings.Cut(groupKind, "_")
		if !found {
			return nil, fmt.Errorf("%s: key %q is not %s<group>_<Kind>", path, key, healthKeyPrefix)
		}
		overrides[group+"/"+kind] = appv1.ResourceOverride{
			HealthLua:   value,
			UseOpenLibs: configMap.Data[openLibsKeyPrefix+groupKind] == "true",
		}
	}
	if len(overrides) == 0 {
		return nil, fmt.Errorf("%s: no %s* key", path, healthKeyPrefix)
	}
	return overrides, nil
}

// decode reads an object as the API machinery does: integers stay int64 (a plain
// json.Unmarshal would make them float64), strings stay strings.
func decode(raw []byte) (*unstructured.Unstructured, error) {
	asJSON, err := yaml.YAMLToJSON(raw)
	if err != nil {
		return nil, err
	}
	obj := &unstructured.Unstructured{}
	if err := obj.UnmarshalJSON(asJSON); err != nil {
		return nil, fmt.Errorf("not a Kubernetes object: %w", err)
	}
	return obj, nil
}

// outcome is Argo CD's answer as the UI shows it: a status and message, or the error.
func outcome(status *health.HealthStatus, err error) Outcome {
	switch {
	case err != nil:
		return Outcome{Error: err.Error()}
	case status == nil:
		return Outcome{Error: "no health status (no script applies)"}
	default:
		return Outcome{Status: string(status.Status), Message: status.Message}
	}
}

func run(obj *unstructured.Unstructured, script string, overrides lua.ResourceHealthOverrides) Result {
	builtin, builtinErr := lua.VM{UseOpenLibs: true}.ExecuteHealthLua(obj.DeepCopy(), script)
	fromConfigMap, configMapErr := overrides.GetResourceHealth(obj.DeepCopy())
	return Result{Builtin: outcome(builtin, builtinErr), ConfigMap: outcome(fromConfigMap, configMapErr)}
}

func runTests(dir, script string, overrides lua.ResourceHealthOverrides) ([]Result, error) {
	raw, err := os.ReadFile(filepath.Join(dir, "health_test.yaml"))
	if err != nil {
		return nil, err
	}
	var tests testFile
	if err := yaml.UnmarshalStrict(raw, &tests); err != nil {
		return nil, fmt.Errorf("health_test.yaml: %w", err)
	}
	if len(tests.Tests) == 0 {
		return nil, fmt.Errorf("health_test.yaml: no tests")
	}
	results := make([]Result, 0, len(tests.Tests))
	for _, test := range tests.Tests {
		input, err := os.ReadFile(filepath.Join(dir, test.InputPath))
		if err != nil {
			return nil, err
		}
		obj, err := decode(input)
		if err != nil {
			return nil, fmt.Errorf("%s: %w", test.InputPath, err)
		}
		result := run(obj, script, overrides)
		result.InputPath = test.InputPath
		result.Expected = &Outcome{Status: test.HealthStatus.Status, Message: test.HealthStatus.Message}
		results = append(results, result)
	}
	return results, nil
}
