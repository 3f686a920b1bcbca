// Command kstatus-check reads one Kubernetes object as JSON on stdin and prints the status
// that sigs.k8s.io/cli-utils' kstatus library computes for it (Current, InProgress, Failed,
// ...), then kstatus' message on a second line. Flux's health checks, `kubectl wait`-style
// tooling and cli-utils' appliers all use this library, so the tests run it on the
// FabricCapability objects the operator really publishes instead of re-implementing its rules.
package main

import (
	"fmt"
	"io"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/cli-utils/pkg/kstatus/status"
)

func main() {
	raw, err := io.ReadAll(os.Stdin)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: reading stdin: %v\n", err)
		os.Exit(2)
	}
	// Unstructured's own decoder keeps integers as int64, as the API machinery does; a plain
	// json.Unmarshal would make metadata.generation a float64 that kstatus rejects.
	object := &unstructured.Unstructured{}
	if err := object.UnmarshalJSON(raw); err != nil {
		fmt.Fprintf(os.Stderr, "error: stdin is not a Kubernetes object: %v\n", err)
		os.Exit(2)
	}
	result, err := status.Compute(object)
	if err != nil {
		fmt.Fprintf(os.Stderr, "error: kstatus: %v\n", err)
		os.Exit(1)
	}
	fmt.Println(result.Status)
	fmt.Println(result.Message)
}
