package main

import (
	"context"
	"encoding/json"
	"fmt"
	"os"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/version"
	"k8s.io/apiserver/pkg/admission"
	plugincel "k8s.io/apiserver/pkg/admission/plugin/cel"
	validating "k8s.io/apiserver/pkg/admission/plugin/policy/validating"
	"k8s.io/apiserver/pkg/admission/plugin/webhook/matchconditions"
	celconfig "k8s.io/apiserver/pkg/apis/cel"
	"k8s.io/apiserver/pkg/cel/environment"
)

// A request to admit: the object, its resource, and the param object the binding selected.
type evaluationCase struct {
	Name      string                 `json:"name"`
	Group     string                 `json:"group"`
	Version   string                 `json:"version"`
	Resource  string                 `json:"resource"`
	Kind      string                 `json:"kind"`
	Operation string                 `json:"operation"` // CREATE (default) or UPDATE
	Object    map[string]interface{} `json:"object"`
	Params    map[string]interface{} `json:"params"`
}

type evaluation struct {
	Name    string  `json:"name"`
	Matched bool    `json:"matched"`           // the match conditions all hold
	Warning *string `json:"warning,omitempty"` // the failing validation's message
	Error   *string `json:"error,omitempty"`   // an expression errored (failurePolicy decides what then)
	Cost    int64   `json:"cost"`              // runtime cost spent
}

func evaluateCases(casesFile, policyFile string, compatibility *version.Version) error {
	policies, err := readPolicies(policyFile)
	if err != nil {
		return err
	}
	if len(policies) != 1 {
		return fmt.Errorf("%s: %d ValidatingAdmissionPolicies, want 1", policyFile, len(policies))
	}
	raw, err := os.ReadFile(casesFile)
	if err != nil {
		return err
	}
	var cases []evaluationCase
	if err := json.Unmarshal(raw, &cases); err != nil {
		return fmt.Errorf("%s: %w", casesFile, err)
	}
	compiled, err := compileForEvaluation(policies[0].Spec, compatibility)
	if err != nil {
		return err
	}
	results := []evaluation{}
	for _, c := range cases {
		results = append(results, compiled.evaluate(c))
	}
	encoded, err := json.MarshalIndent(map[string]interface{}{"cases": results}, "", "  ")
	if err != nil {
		return err
	}
	fmt.Println(string(encoded))
	return nil
}

type compiledPolicy struct {
	match, validations, messages plugincel.ConditionEvaluator
	count                        int
}

func compileForEvaluation(spec admissionregistrationv1.ValidatingAdmissionPolicySpec, compatibility *version.Version) (*compiledPolicy, error) {
	compiler, err := plugincel.NewCompositedCompiler(environment.MustBaseEnvSet(compatibility))
	if err != nil {
		return nil, err
	}
	options := plugincel.OptionalVariableDeclarations{HasParams: spec.ParamKind != nil, HasAuthorizer: false}
	var variables []plugincel.NamedExpressionAccessor
	for _, v := range spec.Variables {
		variables = append(variables, &validating.Variable{Name: v.Name, Expression: v.Expression})
	}
	compiler.CompileAndStoreVariables(variables, options, environment.NewExpressions)
	var matches, validations, messages []plugincel.ExpressionAccessor
	for _, m := range spec.MatchConditions {
		matches = append(matches, &matchconditions.MatchCondition{Name: m.Name, Expression: m.Expression})
	}
	for _, v := range spec.Validations {
		validations = append(validations, &validating.ValidationCondition{Expression: v.Expression})
		messages = append(messages, &validating.MessageExpressionCondition{MessageExpression: v.MessageExpression})
	}
	return &compiledPolicy{
		match:       compiler.CompileCondition(matches, options, environment.NewExpressions),
		validations: compiler.CompileCondition(validations, options, environment.NewExpressions),
		messages:    compiler.CompileCondition(messages, options, environment.NewExpressions),
		count:       len(validations),
	}, nil
}

func (p *compiledPolicy) evaluate(c evaluationCase) evaluation {
	out := evaluation{Name: c.Name}
	fail := func(err error) evaluation {
		text := err.Error()
		out.Error = &text
		return out
	}
	object := &unstructured.Unstructured{Object: c.Object}
	params := &unstructured.Unstructured{Object: c.Params}
	gvk := schema.GroupVersionKind{Group: c.Group, Version: c.Version, Kind: c.Kind}
	gvr := schema.GroupVersionResource{Group: c.Group, Version: c.Version, Resource: c.Resource}
	operation := admission.Create
	if c.Operation == "UPDATE" {
		operation = admission.Update
	}
	attributes := admission.NewAttributesRecord(object, nil, gvk, object.GetNamespace(), object.GetName(), gvr, "", operation, nil, false, nil)
	versioned := &admission.VersionedAttributes{Attributes: attributes, VersionedKind: gvk, VersionedObject: object}
	request := plugincel.CreateAdmissionRequest(attributes, metav1.GroupVersionResource(gvr), metav1.GroupVersionKind(gvk))
	bindings := plugincel.OptionalVariableBindings{VersionedParams: params}
	budget := int64(celconfig.RuntimeCELCostBudget)
	ctx := context.Background()

	matched, remaining, err := p.match.ForInput(ctx, versioned, request, bindings, nil, budget)
	out.Cost = budget - remaining
	if err != nil {
		return fail(err)
	}
	for _, result := range matched {
		if result.Error != nil {
			return fail(result.Error)
		}
		if result.EvalResult.Value() != true {
			return out
		}
	}
	out.Matched = true
	validated, remaining, err := p.validations.ForInput(ctx, versioned, request, bindings, nil, remaining)
	out.Cost = budget - remaining
	if err != nil {
		return fail(err)
	}
	for i, result := range validated {
		if result.Error != nil {
			return fail(result.Error)
		}
		if result.EvalResult.Value() == true {
			continue
		}
		messages, remaining, err := p.messages.ForInput(ctx, versioned, request, bindings, nil, remaining)
		out.Cost = budget - remaining
		if err != nil {
			return fail(err)
		}
		if messages[i].Error != nil {
			return fail(messages[i].Error)
		}
		text := fmt.Sprint(messages[i].EvalResult.Value())
		out.Warning = &text
		return out
	}
	return out
}
