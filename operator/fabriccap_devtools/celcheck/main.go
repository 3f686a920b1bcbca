// celcheck compiles every CEL expression of the ValidatingAdmissionPolicies in YAML files the way
// a kube-apiserver validates a new policy before it stores it, with the CEL environment of a
// given Kubernetes version. A policy that needs a library that environment lacks is refused by
// that server with 422 Invalid: this finds it without that server.
//
// The compile path is k8s.io/kubernetes v1.35.4 pkg/apis/admissionregistration/validation
// (validateValidatingAdmissionPolicySpec): matchConditions with a stateless compiler, variables,
// validations and messageExpressions with a composited one (variables stored in order), each
// as environment.NewExpressions, all from environment.MustBaseEnvSet(DefaultCompatibilityVersion()).
// k8s.io/apiserver keeps every version's environment, so any version from 1.28 on can be named.
//
//	celcheck -environment 1.29 policies.yaml...
//
// Prints a JSON report; exits 1 when an expression does not compile, 2 on bad input.
//
//	celcheck -environment 1.29 -evaluate cases.json policy.yaml
//
// Evaluates the one policy in policy.yaml for each case (an object, its resource and a param),
// as the API server's admission does: the match conditions, then the validations in order, the
// first that fails giving its messageExpression, within the runtime cost budget. Prints a JSON
// report of what each case is told; its stages come from k8s.io/apiserver
// pkg/admission/plugin/policy/validating (validator.go), errors reported, not hidden by a
// failurePolicy.
package main

import (
	"bufio"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	"k8s.io/apimachinery/pkg/util/version"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	validating "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	"k8s.io/apiserver/pkg/cel/environment"
	"sigs.k8s.io/yaml"
)

type failure struct {
	Field string `json:"field"`
	Error string `json:"error"`
}

type policyReport struct {
	File     string    `json:"file"`
	Name     string    `json:"name"`
	Compiled int       `json:"compiled"` // expressions compiled, failures included
	Failures []failure `json:"failures"`
}

type report struct {
	Environment string         `json:"environment"`
	Policies    []policyReport `json:"policies"`
}

func main() {
	environmentVersion := flag.String("environment", "", "the CEL environment's Kubernetes version, MAJOR.MINOR")
	casesFile := flag.String("evaluate", "", "a JSON list of cases to evaluate the policy for")
	flag.Parse()
	if *environmentVersion == "" || flag.NArg() == 0 {
		fmt.Fprintln(os.Stderr, "usage: celcheck -environment MAJOR.MINOR FILE...")
		os.Exit(2)
	}
	compatibility, err := version.ParseMajorMinor(*environmentVersion)
	if err != nil {
		fmt.Fprintf(os.Stderr, "celcheck: -environment %q: %v\n", *environmentVersion, err)
		os.Exit(2)
	}
	if *casesFile != "" {
		if flag.NArg() != 1 {
			fmt.Fprintln(os.Stderr, "celcheck: -evaluate takes one policy file")
			os.Exit(2)
		}
		if err := evaluateCases(*casesFile, flag.Arg(0), compatibility); err != nil {
			fmt.Fprintf(os.Stderr, "celcheck: %v\n", err)
			os.Exit(2)
		}
		return
	}
	out := report{Environment: compatibility.String(), Policies: []policyReport{}}
	for _, file := range flag.Args() {
		policies, err := readPolicies(file)
		if err != nil {
			fmt.Fprintf(os.Stderr, "celcheck: %s: %v\n", file, err)
			os.Exit(2)
		}
		for _, policy := range policies {
			checked, err := check(policy, compatibility)
			if err != nil {
				fmt.Fprintf(os.Stderr, "celcheck: %s: %s: %v\n", file, policy.Name, err)
				os.Exit(2)
			}
			checked.File = file
			out.Policies = append(out.Policies, checked)
		}
	}
	encoded, err := json.MarshalIndent(out, "", "  ")
	if err != nil {
		panic(err)
	}
	fmt.Println(string(encoded))
	for _, policy := range out.Policies {
		if len(policy.Failures) > 0 {
			os.Exit(1)
		}
	}
}

// readPolicies: every ValidatingAdmissionPolicy of admissionregistration.k8s.io/v1 in a YAML
// stream; other documents are skipped.
func readPolicies(file string) ([]admissionregistrationv1.ValidatingAdmissionPolicy, error) {
	handle, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer handle.Close()
	reader := utilyaml.NewYAMLReader(bufio.NewReader(handle))
	var policies []admissionregistrationv1.ValidatingAdmissionPolicy
	for {
		document, err := reader.Read()
		if errors.Is(err, io.EOF) {
			return policies, nil
		}
		if err != nil {
			return nil, err
		}
		var header struct {
			APIVersion string `json:"apiVersion"`
			Kind       string `json:"kind"`
		}
		if err := yaml.Unmarshal(document, &header); err != nil {
			return nil, err
		}
		if header.APIVersion != "admissionregistration.k8s.io/v1" || header.Kind != "ValidatingAdmissionPolicy" {
			continue
		}
		var policy admissionregistrationv1.ValidatingAdmissionPolicy
		if err := yaml.UnmarshalStrict(document, &policy); err != nil {
			return nil, err
		}
		policies = append(policies, policy)
	}
}

func check(policy admissionregistrationv1.ValidatingAdmissionPolicy, compatibility *version.Version) (policyReport, error) {
	out := policyReport{Name: policy.Name, Failures: []failure{}}
	spec := policy.Spec
	hasParams := spec.ParamKind != nil
	record := func(field string, result plugincel.CompilationResult) {
		out.Compiled++
		if result.Error != nil {
			out.Failures = append(out.Failures, failure{field, firstLines(result.Error.Error())})
		}
	}
	// As the server does: a stateless compiler for the match conditions (params allowed when
	// the policy has a paramKind), and one composited compiler for the rest of a policy with
	// variables (each stored for the expressions after it).
	stateless := plugincel.NewCompiler(environment.MustBaseEnvSet(compatibility))
	for i, condition := range spec.MatchConditions {
		accessor := matchconditions.MatchCondition{Name: condition.Name, Expression: condition.Expression}
		record(fmt.Sprintf("spec.matchConditions[%d].expression", i), stateless.CompileCELExpression(
			&accessor,
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true},
			environment.NewExpressions,
		))
	}
	var compiler plugincel.Compiler = stateless // a policy without variables needs no composition
	if len(spec.Variables) > 0 {
		composited, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(compatibility))
		if err != nil {
			return out, err
		}
		compiler = composited
	}
	for i, variable := range spec.Variables {
		record(fmt.Sprintf("spec.variables[%d].expression (%s)", i, variable.Name), compiler.(*plugincel.CompositedCompiler).CompileAndStoreVariable(
			&validating.Variable{Name: variable.Name, Expression: variable.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true},
			environment.NewExpressions,
		))
	}
	for i, validation := range spec.Validations {
		record(fmt.Sprintf("spec.validations[%d].expression", i), compiler.CompileCELExpression(
			&validating.ValidationCondition{Expression: validation.Expression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true},
			environment.NewExpressions,
		))
		if validation.MessageExpression != "" {
			record(fmt.Sprintf("spec.validations[%d].messageExpression", i), compiler.CompileCELExpression(
				&validating.MessageExpressionCondition{MessageExpression: validation.MessageExpression},
				plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: false},
				environment.NewExpressions,
			))
		}
	}
	for i, annotation := range spec.AuditAnnotations {
		record(fmt.Sprintf("spec.auditAnnotations[%d].valueExpression", i), compiler.CompileCELExpression(
			&validating.AuditAnnotationCondition{Key: annotation.Key, ValueExpression: annotation.ValueExpression},
			plugincel.OptionalVariableDeclarations{HasParams: hasParams, HasAuthorizer: true},
			environment.NewExpressions,
		))
	}
	return out, nil
}

// firstLines: the compiler's message without the lines that echo the expression and point at
// a column in it (" | ..."), which repeat kilobytes of generated CEL per error.
func firstLines(message string) string {
	var kept []string
	for _, line := range strings.Split(message, "\n") {
		if !strings.HasPrefix(line, " | ") {
			kept = append(kept, line)
		}
	}
	return strings.Join(kept, "\n")
}
