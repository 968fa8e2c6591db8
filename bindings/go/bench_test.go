package deft

import (
	"runtime"
	"testing"
	"time"
)

// go test -run - -bench PlusScalar: the per-call cost of x + 1 (bench/go
// compares it with the C call in the same run).
func BenchmarkPlusScalarClosed(b *testing.B) {
	x := must(FromFloat32([]float32{1}, 1))
	opts := &InternalPlusScalarOpts{Scalar: Ptr(1.0)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		y := must(InternalPlusScalar(x, opts))
		y.Close()
	}
}

func BenchmarkPlusScalarDropped(b *testing.B) {
	x := must(FromFloat32([]float32{1}, 1))
	opts := &InternalPlusScalarOpts{Scalar: Ptr(1.0)}
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		must(InternalPlusScalar(x, opts))
	}
	settleArrays()
}

// settleArrays collects until every dropped array's finalizer has run.
func settleArrays() {
	for {
		runtime.GC()
		before := finalized.Load()
		time.Sleep(time.Millisecond)
		if finalized.Load() == before {
			return
		}
	}
}
