package deft

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"
)

// must returns v, or fails the test (by panicking: it also runs in goroutines).
func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func scalar(t *testing.T, op string, a *NDArray, s string) *NDArray {
	return must(a.Call(op, nil, Param{"scalar", s}))
}

func TestDeferredComputeExport(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2, 3}, 3))
	defer x.Close()
	var y, z *NDArray
	err := WithDeferredCompute(func() error {
		a := scalar(t, "_plus_scalar", x, "5")
		y = must(a.Call("elemwise_mul", []*NDArray{a}))
		z = must(x.Call("elemwise_mul", []*NDArray{x}))
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if lazy := must(y.IsLazy()); !lazy {
		t.Fatal("y should be lazy until read")
	}
	sym := must(Export([]Named{{"x", x}}, []Named{{"y", y}, {"z", z}}))
	defer sym.Close()
	if in := must(sym.ListInputs()); fmt.Sprint(in) != "[x]" {
		t.Fatalf("list_inputs = %v, want [x]", in)
	}
	if got := must(y.Float32s()); fmt.Sprint(got) != "[36 49 64]" {
		t.Fatalf("y = %v", got)
	}
	op := must(NewCachedOp(must(SymbolFromJSON(must(sym.JSON())))))
	defer op.Close()
	outs := must(op.Call(must(FromFloat32([]float32{0, 1, 2}, 3))))
	if got := must(outs[1].Float32s()); fmt.Sprint(got) != "[0 1 4]" {
		t.Fatalf("z by the executor = %v", got)
	}
}

func TestAutograd(t *testing.T) {
	x := must(FromFloat64([]float64{1, 2, 3}, 3))
	g := must(x.AttachGrad())
	var y *NDArray
	if err := WithRecording(func() error {
		sq := must(x.Call("elemwise_mul", []*NDArray{x}))
		y = must(must(sq.Call("elemwise_mul", []*NDArray{x})).Call("sum", nil))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := Backward(y); err != nil {
		t.Fatal(err)
	}
	if got := must(g.Float64s()); fmt.Sprint(got) != "[3 12 27]" {
		t.Fatalf("d/dx sum(x^3) = %v", got)
	}
}

func TestErrorsCarryTheMessage(t *testing.T) {
	_, err := Zeros(Float32, 2, -3)
	var e *Error
	if !errors.As(err, &e) || e.Kind != ErrValue || !strings.Contains(e.Message, "shape[1] is -3") {
		t.Fatalf("got %v", err)
	}
	x := must(Zeros(Float32, 2, 2))
	if _, err := Invoke("no_such_op", []*NDArray{x}); err == nil ||
		!strings.Contains(err.Error(), "unknown operator 'no_such_op'") {
		t.Fatalf("got %v", err)
	}
	if _, err := x.Float64s(); err == nil || !strings.Contains(err.Error(), "dtype") {
		t.Fatalf("got %v", err)
	}
	if err := x.Close(); err != nil {
		t.Fatal(err)
	}
	if err := x.Close(); err != ErrClosed {
		t.Fatalf("second Close: %v", err)
	}
	if _, err := x.Shape(); err != ErrClosed {
		t.Fatalf("use after Close: %v", err)
	}
	if _, err := x.Call("exp", nil); err == nil || !errors.Is(err, ErrClosed) {
		t.Fatalf("input after Close: %v", err)
	}
}

// Each goroutine fails with its own message, though goroutines share OS threads.
func TestConcurrentFailuresKeepTheirOwnMessages(t *testing.T) {
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := 0; i < 64; i++ {
		wg.Add(1)
		go func(i int) {
			defer wg.Done()
			for k := 0; k < 50; k++ {
				_, err := Zeros(Float32, 1, int64(-i-1))
				want := fmt.Sprintf("shape[1] is %d,", -i-1)
				if err == nil || !strings.Contains(err.Error(), want) {
					errs <- fmt.Errorf("goroutine %d got %v, want %q", i, err, want)
					return
				}
				runtime.Gosched()
			}
		}(i)
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}

func settle(t *testing.T) (int64, int64) {
	for i := 0; i < 5; i++ {
		runtime.GC()
		time.Sleep(10 * time.Millisecond) // finalizers run on their own goroutine
	}
	if err := WaitAll(); err != nil {
		t.Fatal(err)
	}
	a, b, err := Counters()
	if err != nil {
		t.Fatal(err)
	}
	return a, b
}

func TestDropped100kArraysReturnToBaseline(t *testing.T) {
	arrays, bytes := settle(t)
	x := must(FromFloat32([]float32{1, 2, 3, 4}, 4))
	for i := 0; i < 100000; i++ {
		y := scalar(t, "_plus_scalar", x, "1")
		if i%2 == 0 {
			y.Close() // half explicitly, half left to the finalizer
		}
	}
	x.Close()
	if a, b := settle(t); a != arrays || b != bytes {
		t.Fatalf("live arrays %d -> %d, bytes %d -> %d", arrays, a, bytes, b)
	}
}

func TestFinalizersWhileOtherGoroutinesCompute(t *testing.T) {
	arrays, _ := settle(t)
	x := must(FromFloat32(make([]float32, 1024), 1024))
	var wg sync.WaitGroup
	for w := 0; w < 4; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			acc := scalar(t, "_plus_scalar", x, "0")
			for i := 0; i < 500; i++ {
				acc = must(acc.Call("elemwise_add", []*NDArray{x})) // previous acc: finalizer
				if i%50 == 0 {
					runtime.GC()
				}
			}
			if _, err := acc.Float32s(); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	x.Close()
	if a, _ := settle(t); a != arrays {
		t.Fatalf("live arrays %d -> %d", arrays, a)
	}
}

type cube struct{}

func (cube) InferShape(s [][]int64, d []DType) ([]int64, DType, error) { return s[0], d[0], nil }

func (cube) Forward(in []*NDArray, out *NDArray, isTrain bool) error {
	sq, err := in[0].Call("elemwise_mul", []*NDArray{in[0]})
	if err != nil {
		return err
	}
	c, err := sq.Call("elemwise_mul", []*NDArray{in[0]})
	if err != nil {
		return err
	}
	return InvokeInto("_copyto", []*NDArray{c}, []*NDArray{out})
}

func (cube) Backward(dy *NDArray, in []*NDArray, y *NDArray, dx []*NDArray) error {
	sq, err := in[0].Call("elemwise_mul", []*NDArray{in[0]})
	if err != nil {
		return err
	}
	three, err := sq.Call("_mul_scalar", nil, Param{"scalar", "3"})
	if err != nil {
		return err
	}
	return InvokeInto("elemwise_mul", []*NDArray{three, dy}, dx)
}

type failing struct{ cube }

func (failing) Forward(in []*NDArray, out *NDArray, isTrain bool) error {
	return errors.New("the Go side said no")
}

func TestCustomOperatorsInGo(t *testing.T) {
	if err := RegisterCustomOp("go_cube", 1, cube{}, true); err != nil {
		t.Fatal(err)
	}
	x := must(FromFloat64([]float64{1, -2, 0.5}, 3))
	y := must(Invoke("go_cube", []*NDArray{x}))[0]
	if got := must(y.Float64s()); fmt.Sprint(got) != "[1 -8 0.125]" {
		t.Fatalf("cube = %v", got)
	}
	g := must(x.AttachGrad())
	var s *NDArray
	if err := WithRecording(func() error {
		c := must(Invoke("go_cube", []*NDArray{x}))[0]
		s = must(c.Call("sum", nil))
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	if err := Backward(s); err != nil {
		t.Fatal(err)
	}
	if got := must(g.Float64s()); fmt.Sprint(got) != "[3 12 0.75]" {
		t.Fatalf("gradient = %v", got)
	}
	if err := RegisterCustomOp("go_failing", 1, failing{}, false); err != nil {
		t.Fatal(err)
	}
	z := must(Invoke("go_failing", []*NDArray{x}))[0]
	if _, err := z.Float64s(); err == nil || !strings.Contains(err.Error(), "the Go side said no") {
		t.Fatalf("got %v", err)
	}
	WaitAll() // reports this thread's failure; z keeps it
	if err := RegisterCustomOp("a::b", 1, cube{}, false); err == nil || !strings.Contains(err.Error(), "'::'") {
		t.Fatalf("got %v", err)
	}
}

// GPUs are counted everywhere; asking for one past the last names it.
func TestGPUCountAndMissingGPU(t *testing.T) {
	n, err := GPUCount()
	if err != nil || n < 0 {
		t.Fatalf("GPUCount: %d, %v", n, err)
	}
	ctx := fmt.Sprintf("gpu(%d)", n)
	_, err = Invoke("_zeros", nil, Param{"shape", "(2,)"}, Param{"ctx", ctx})
	if err == nil || !strings.Contains(err.Error(), ctx) {
		t.Fatalf("creating on %s: %v", ctx, err)
	}
}
