package deft

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"testing"
)

// The generated functions pass typed parameters as the registry reads them.
func TestGeneratedOperators(t *testing.T) {
	x := must(FromFloat32([]float32{-1, 2, -3, 4, 5, -6}, 2, 3))
	if got := must(must(Relu(x)).Float32s()); fmt.Sprint(got) != "[0 2 0 4 5 0]" {
		t.Fatalf("Relu: %v", got)
	}
	parts := must(Split(x, 3, &SplitOpts{Axis: Ptr(int64(1))}))
	if len(parts) != 3 || fmt.Sprint(must(parts[2].Float32s())) != "[-3 -6]" {
		t.Fatalf("Split: %d parts", len(parts))
	}
	s := must(Sum(x, &SumOpts{Axis: []int64{1}, Keepdims: Ptr(true)}))
	if got := must(s.Shape()); fmt.Sprint(got) != "[2 1]" {
		t.Fatalf("Sum keepdims shape %v", got)
	}
	if got := must(must(Sum(x, nil)).Float32s()); fmt.Sprint(got) != "[1]" {
		t.Fatalf("Sum: %v", got)
	}
	if got := must(must(Cast(x, Int32)).Int32s()); fmt.Sprint(got) != "[-1 2 -3 4 5 -6]" {
		t.Fatalf("Cast: %v", got)
	}
	c := must(Concat([]*NDArray{x, x, x}, &ConcatOpts{Dim: Ptr(int64(0))}))
	if got := must(c.Shape()); fmt.Sprint(got) != "[6 3]" {
		t.Fatalf("Concat shape %v", got)
	}
	one := must(InternalPlusScalar(x, &InternalPlusScalarOpts{Scalar: Ptr(1.5)}))
	if got := must(one.Float32s()); fmt.Sprint(got) != "[0.5 3.5 -1.5 5.5 6.5 -4.5]" {
		t.Fatalf("_plus_scalar: %v", got)
	}
	z := must(InternalZeros(&InternalZerosOpts{Shape: []int64{2}, Dtype: Ptr(Int64), Ctx: Ptr(CPU)}))
	if got := must(z.Int64s()); fmt.Sprint(got) != "[0 0]" {
		t.Fatalf("_zeros: %v", got)
	}
	// an optional input: the bias, or no_bias
	w := must(FromFloat32([]float32{1, 1, 1}, 1, 3))
	b := must(FromFloat32([]float32{10}, 1))
	withBias := must(FullyConnected(x, w, 1, &FullyConnectedOpts{Bias: b}))
	noBias := must(FullyConnected(x, w, 1, &FullyConnectedOpts{NoBias: Ptr(true)}))
	if got := fmt.Sprint(must(withBias.Float32s()), must(noBias.Float32s())); got != "[8 13] [-2 3]" {
		t.Fatalf("FullyConnected: %s", got)
	}
	// a bad value comes back as the library's error
	if _, err := Split(x, 4, &SplitOpts{Axis: Ptr(int64(1))}); !errors.Is(err, ErrValue) {
		t.Fatalf("Split into 4: %v", err)
	}
}

// ops_gen.go is what the generator makes from the registry now: a new or
// changed operator fails this test until `go generate` is run again.
func TestGeneratedOpsAreCurrent(t *testing.T) {
	out := filepath.Join(t.TempDir(), "ops_gen.go")
	goTool := filepath.Join(runtime.GOROOT(), "bin", "go") // the go running this test
	cmd := exec.Command(goTool, "run", "-tags", "deft_noops", "./gen", "-o", out)
	if msg, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("go run ./gen: %v\n%s", err, msg)
	}
	fresh, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	committed, err := os.ReadFile("ops_gen.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(fresh, committed) {
		t.Fatal("ops_gen.go is stale: run `go generate` in bindings/go and commit the result")
	}
}
