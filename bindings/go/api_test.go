package deft

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
)

// Every dtype goes in and out through its own reader; a reader of another
// dtype fails with a *DTypeError that is an ErrType.
func TestReadersForEveryDType(t *testing.T) {
	arrays := map[DType]*NDArray{
		Float32:  must(FromFloat32([]float32{1.5, -2}, 2)),
		Float64:  must(FromFloat64([]float64{1.5, -2}, 2)),
		Int32:    must(FromInt32([]int32{1 << 30, -2}, 2)),
		Int64:    must(FromInt64([]int64{1 << 40, -2}, 2)),
		Int8:     must(FromInt8([]int8{127, -128}, 2)),
		Uint8:    must(FromUint8([]uint8{255, 0}, 2)),
		Bool:     must(FromBool([]bool{true, false}, 2)),
		Float16:  must(FromFloat16Bits([]uint16{0x3c00, 0xc000}, 2)), // 1, -2
		BFloat16: must(FromBFloat16Bits([]uint16{0x3f80, 0xc000}, 2)),
	}
	read := map[DType]func(a *NDArray) (string, error){
		Float32:  func(a *NDArray) (string, error) { v, err := a.Float32s(); return fmt.Sprint(v), err },
		Float64:  func(a *NDArray) (string, error) { v, err := a.Float64s(); return fmt.Sprint(v), err },
		Int32:    func(a *NDArray) (string, error) { v, err := a.Int32s(); return fmt.Sprint(v), err },
		Int64:    func(a *NDArray) (string, error) { v, err := a.Int64s(); return fmt.Sprint(v), err },
		Int8:     func(a *NDArray) (string, error) { v, err := a.Int8s(); return fmt.Sprint(v), err },
		Uint8:    func(a *NDArray) (string, error) { v, err := a.Uint8s(); return fmt.Sprint(v), err },
		Bool:     func(a *NDArray) (string, error) { v, err := a.Bools(); return fmt.Sprint(v), err },
		Float16:  func(a *NDArray) (string, error) { v, err := a.Float16Bits(); return fmt.Sprintf("%x", v), err },
		BFloat16: func(a *NDArray) (string, error) { v, err := a.BFloat16Bits(); return fmt.Sprintf("%x", v), err },
	}
	want := map[DType]string{
		Float32: "[1.5 -2]", Float64: "[1.5 -2]", Int32: "[1073741824 -2]",
		Int64: "[1099511627776 -2]", Int8: "[127 -128]", Uint8: "[255 0]", Bool: "[true false]",
		Float16: "[3c00 c000]", BFloat16: "[3f80 c000]",
	}
	for dtype, a := range arrays {
		if got := must(a.DType()); got != dtype {
			t.Errorf("%v array has dtype %v", dtype, got)
		}
		for reader, fn := range read {
			got, err := fn(a)
			if reader == dtype {
				if err != nil || got != want[dtype] {
					t.Errorf("%v: %s, %v; want %s", dtype, got, err, want[dtype])
				}
				continue
			}
			var de *DTypeError
			if !errors.As(err, &de) || de.Have != dtype || de.Want != reader ||
				!errors.Is(err, ErrType) || errors.Is(err, ErrValue) {
				t.Errorf("reading %v as %v: %v", dtype, reader, err)
			}
		}
	}
	if s := Int64.String() + "," + BFloat16.String() + "," + DType(99).String(); s != "int64,bfloat16,DType(99)" {
		t.Errorf("names: %s", s)
	}
}

// Kinds name themselves and are errors.Is targets; errors.As finds *Error.
func TestErrorKindsAreSentinels(t *testing.T) {
	_, err := Zeros(Float32, 2, -3)
	var e *Error
	if !errors.Is(err, ErrValue) || errors.Is(err, ErrIndex) || !errors.As(err, &e) ||
		e.Kind != ErrValue {
		t.Fatalf("bad shape: %v", err)
	}
	wrapped := fmt.Errorf("building the model: %w", err)
	if !errors.Is(wrapped, ErrValue) {
		t.Fatalf("wrapped: %v", wrapped)
	}
	x := must(FromFloat32([]float32{1, 2}, 2))
	_, err = x.Call("sum", nil, Param{"axis", "5"})
	if !errors.Is(err, ErrIndex) && !errors.Is(err, ErrValue) {
		t.Fatalf("axis 5: %v (%T)", err, err)
	}
	_, err = x.Call("sum", nil, Param{"axis", "(1"})
	if !errors.Is(err, ErrParse) && !errors.Is(err, ErrValue) {
		t.Fatalf("axis '(1': %v", err)
	}
	names := []string{}
	for k := ErrValue; k <= ErrInternal+1; k++ {
		names = append(names, k.String())
	}
	if got := strings.Join(names, ","); got != "value error,type error,index error,"+
		"not implemented,out of memory,parse error,internal error,ErrorKind(8)" {
		t.Fatalf("names: %s", got)
	}
	if ErrNotImplemented.Error() != "deft: not implemented" {
		t.Fatalf("Error(): %s", ErrNotImplemented.Error())
	}
}

// No output cap in Go: split makes as many outputs as asked for, found
// by asking the operator; given outputs must be enough.
func TestOutputsAreNotCapped(t *testing.T) {
	data := make([]float32, 320)
	for i := range data {
		data[i] = float32(i)
	}
	arrays, _ := settle(t)
	x := must(FromFloat32(data, 320))
	for _, n := range []int{1, 4, 5, 20, 64} {
		outs := must(Invoke("split", []*NDArray{x}, Param{"num_outputs", fmt.Sprint(n)}, Param{"axis", "0"}))
		if len(outs) != n {
			t.Fatalf("split into %d made %d outputs", n, len(outs))
		}
		last := must(outs[n-1].Float32s())
		if last[len(last)-1] != 319 || len(last) != 320/n {
			t.Fatalf("split into %d: last part %v", n, last)
		}
		for _, o := range outs {
			o.Close()
		}
	}
	one := must(Zeros(Float32, 160))
	err := InvokeInto("split", []*NDArray{x}, []*NDArray{one}, Param{"num_outputs", "2"}, Param{"axis", "0"})
	if !errors.Is(err, ErrValue) || !strings.Contains(err.Error(), "split makes 2 outputs, 1 given") {
		t.Fatalf("too few outputs given: %v", err)
	}
	one.Close()
	x.Close()
	if a, _ := settle(t); a != arrays {
		t.Fatalf("live arrays %d -> %d: a retry leaked", arrays, a)
	}
}

func TestDeviceAndCopies(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2, 3}, 3))
	if d := must(x.Device()); d != CPU || d.String() != "cpu(0)" {
		t.Fatalf("device %v", d)
	}
	y := must(x.CopyTo(CPU))
	if got := must(y.Float32s()); fmt.Sprint(got) != "[1 2 3]" {
		t.Fatalf("copy: %v", got)
	}
	n := must(GPUCount())
	if _, err := ZerosOn(GPU(n), Float32, 2); err == nil || !strings.Contains(err.Error(), "gpu") {
		t.Fatalf("ZerosOn(GPU(%d)): %v", n, err)
	}
	if n == 0 {
		t.Log("no GPU: the GPU round trip is skipped")
		return
	}
	g := must(x.CopyTo(GPU(n - 1)))
	if d := must(g.Device()); d != GPU(n-1) {
		t.Fatalf("on %v", d)
	}
	doubled := must(g.Call("_mul_scalar", nil, Param{"scalar", "2"}))
	if d := must(doubled.Device()); d != GPU(n-1) {
		t.Fatalf("result on %v", d)
	}
	if got := must(must(doubled.CopyTo(CPU)).Float32s()); fmt.Sprint(got) != "[2 4 6]" {
		t.Fatalf("GPU round trip: %v", got)
	}
}

func TestAutogradModes(t *testing.T) {
	x := must(FromFloat64([]float64{1, 2, 3}, 3))
	g := must(x.AttachGradReq(GradAdd))
	for pass := 0; pass < 2; pass++ { // GradAdd: the second pass adds
		var y *NDArray
		must(0, WithRecording(func() error {
			if !must(IsRecording()) || !must(IsTraining()) {
				t.Error("WithRecording: want recording in training mode, as Python's record()")
			}
			y = must(must(x.Call("elemwise_mul", []*NDArray{x})).Call("sum", nil))
			// inside WithoutRecording nothing is recorded: its result has no history
			return WithoutRecording(func() error {
				if must(IsRecording()) || must(IsTraining()) {
					t.Error("WithoutRecording: want neither, as Python's pause()")
				}
				z := must(x.Call("elemwise_mul", []*NDArray{x}))
				if err := Backward(must(z.Call("sum", nil))); err == nil {
					t.Error("backward through an unrecorded call succeeded")
				}
				return nil
			})
		}))
		must(0, Backward(y))
	}
	if got := must(g.Float64s()); fmt.Sprint(got) != "[4 8 12]" {
		t.Fatalf("accumulated gradient %v", got)
	}
	// Grad returns new arrays and leaves the variable's gradient alone
	var y *NDArray
	must(0, WithRecording(func() error {
		y = must(must(x.Call("elemwise_mul", []*NDArray{x})).Call("sum", nil))
		return nil
	}))
	grads := must(Grad([]*NDArray{y}, []*NDArray{x}, false))
	if got := must(grads[0].Float64s()); fmt.Sprint(got) != "[2 4 6]" {
		t.Fatalf("Grad: %v", got)
	}
	if got := must(g.Float64s()); fmt.Sprint(got) != "[4 8 12]" {
		t.Fatalf("Grad changed the gradient array: %v", got)
	}
	// training mode: Dropout drops in training, passes through in prediction
	ones := must(FromFloat32(filled(1000, 1), 1000))
	zeros := func() int {
		out := must(ones.Call("Dropout", nil, Param{"p", "0.5"}))
		n := 0
		for _, v := range must(out.Float32s()) {
			if v == 0 {
				n++
			}
		}
		return n
	}
	var train, predict int
	must(0, WithTraining(func() error { train = zeros(); return nil }))
	must(0, WithPredicting(func() error { predict = zeros(); return nil }))
	if train < 300 || train > 700 || predict != 0 {
		t.Fatalf("dropout zeros: %d training, %d predicting", train, predict)
	}
}

func TestCachedOpFlags(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2, 3}, 3))
	var y *NDArray
	must(0, WithDeferredCompute(func() error {
		y = must(must(x.Call("elemwise_mul", []*NDArray{x})).Call("exp", nil))
		return nil
	}))
	sym := must(Export([]Named{{"x", x}}, []Named{{"y", y}}))
	want := fmt.Sprint(must(y.Float32s()))
	for _, flags := range []CachedOpFlags{0, NoMemoryPlan, Fuse, NoMemoryPlan | Fuse} {
		op := must(NewCachedOpWith(sym, flags))
		if got := fmt.Sprint(must(must(op.Call(x))[0].Float32s())); got != want {
			t.Errorf("flags %d: %s, want %s", flags, got, want)
		}
		op.Close()
	}
	// forward and backward in one run: inputs x and the head gradient,
	// outputs y and dy/dx = 2x exp(x^2) times the head gradient
	op := must(NewCachedOpWith(sym, WithBackward))
	outs := must(op.Call(x, must(FromFloat32([]float32{1, 1, 0}, 3))))
	if len(outs) != 2 {
		t.Fatalf("%d outputs", len(outs))
	}
	grad := must(outs[1].Float32s())
	ys := must(y.Float32s())
	for i, xi := range []float32{1, 2, 3} {
		w := 2 * xi * ys[i]
		if i == 2 {
			w = 0
		}
		if d := grad[i] - w; d > 1e-3*w || d < -1e-3*w {
			t.Fatalf("gradient %v, y %v", grad, ys)
		}
	}
	if _, err := NewCachedOpWith(sym, 64); err == nil {
		t.Fatal("unknown flag accepted")
	}
}

func TestProfiler(t *testing.T) {
	file := filepath.Join(t.TempDir(), "trace.json")
	must(0, ProfilerConfig(Param{"profile_all", "true"}, Param{"aggregate_stats", "true"},
		Param{"filename", file}))
	must(0, ProfilerReset())
	must(0, ProfilerStart())
	dom := must(NewProfileDomain("go_domain"))
	task := must(dom.NewObject(ProfileTask, "go_task"))
	must(0, task.Start())
	x := must(FromFloat32([]float32{1, 2}, 2))
	must(must(x.Call("exp", nil)).Float32s())
	must(0, task.Stop())
	counter := must(dom.NewObject(ProfileCounter, "go_counter"))
	must(0, counter.SetCounter(5, false))
	must(0, counter.SetCounter(2, true))
	must(0, dom.Marker("go_marker", "process"))
	if err := task.SetCounter(1, false); err == nil {
		t.Error("a task took a counter value")
	}
	must(0, ProfilerStop())
	must(0, ProfilerDump(true))
	stats := must(ProfilerStats(true, false))
	if !strings.Contains(stats, `"exp"`) {
		t.Errorf("statistics lack exp: %s", stats)
	}
	trace, err := os.ReadFile(file)
	for _, name := range []string{"go_task", "go_counter", "go_marker", "go_domain"} {
		if err != nil || !strings.Contains(string(trace), name) {
			t.Errorf("trace (%v) lacks %s: %.400s", err, name, trace)
		}
	}
	if err := ProfilerConfig(Param{"no_such_option", "1"}); err == nil {
		t.Error("unknown option accepted")
	}
	for _, o := range []interface{ Close() error }{task, counter, dom} {
		must(0, o.Close())
	}
	if err := task.Start(); err != ErrClosed {
		t.Errorf("closed object: %v", err)
	}
}

// A DLPack view is the array's memory: writes through it show in the array;
// it stays valid after the array is closed and collected; an array made
// from a view shares the memory too.
func TestDLPackViews(t *testing.T) {
	x := must(FromFloat32([]float32{1, 2, 3}, 3))
	v := must(x.ToDLPack())
	view := must(v.Float32s())
	view[1] = 20
	if got := must(x.Float32s()); fmt.Sprint(got) != "[1 20 3]" {
		t.Fatalf("write through the view: %v", got)
	}
	if _, err := v.Int32s(); !errors.Is(err, ErrType) {
		t.Fatalf("int32 view of float32: %v", err)
	}
	x.Close()
	runtime.GC()
	if fmt.Sprint(view) != "[1 20 3]" {
		t.Fatalf("view after the array's Close: %v", view)
	}
	runtime.KeepAlive(v)
	y := must(FromDLPack(v))
	if _, err := v.Float32s(); err != ErrClosed {
		t.Fatalf("view taken over: %v", err)
	}
	z := must(y.Call("_plus_scalar", nil, Param{"scalar", "1"}))
	if got := must(z.Float32s()); fmt.Sprint(got) != "[2 21 4]" {
		t.Fatalf("array over the view: %v", got)
	}
}

// Calls past the frame's inline room: more than 8 inputs, more than 8
// outputs (TestOutputsAreNotCapped), parameters longer than 256 bytes.
func TestCallsPastTheInlineRoom(t *testing.T) {
	var in []*NDArray
	for i := 0; i < 12; i++ {
		in = append(in, must(FromFloat32([]float32{float32(i), 1}, 2)))
	}
	if got := must(must(AddN(in, nil)).Float32s()); fmt.Sprint(got) != "[66 12]" {
		t.Fatalf("add_n of 12: %v", got)
	}
	axes := strings.Repeat("0,", 100)
	_, err := in[0].Call("sum", nil, Param{"axis", "(" + axes + ")"}, Param{"keepdims", "true"})
	if err == nil || !strings.Contains(err.Error(), "axis") {
		t.Fatalf("a 300-byte parameter: %v", err)
	}
	long := must(in[0].Call("sum", nil, Param{"axis", "(0)" + strings.Repeat(" ", 300)}))
	if got := must(long.Float32s()); fmt.Sprint(got) != "[1]" {
		t.Fatalf("sum with a long axis text: %v", got)
	}
}
