package deft

import (
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
)

// dotValues is the shape of a use-after-free: y's last use is the
// read, so without runtime.KeepAlive inside the binding the finalizer may
// free y's handle while C still copies from it.
func dotValues(a, b *NDArray) ([]float32, error) {
	y, err := a.Call("dot", []*NDArray{b})
	if err != nil {
		return nil, err
	}
	return y.Float32s()
}

// Reads race a goroutine forcing collections and one allocating arrays of
// the same size (so freed storage is reused with other values): every value
// of every read must still be right.
func TestReadsSurviveCollectionsAndReuse(t *testing.T) {
	const n, reads = 128, 400
	a := must(FromFloat32(filled(n*n, 1), n, n))
	b := must(FromFloat32(filled(n*n, 2), n, n))
	defer a.Close()
	defer b.Close()
	var stop atomic.Bool
	var wg sync.WaitGroup
	wg.Add(2)
	go func() { // collections, so finalizers run all the time
		defer wg.Done()
		for !stop.Load() {
			runtime.GC()
		}
	}()
	go func() { // same-sized arrays, dropped at once, holding other values
		defer wg.Done()
		junk := filled(n*n, -7)
		for !stop.Load() {
			if _, err := FromFloat32(junk, n, n); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	wrongReads, failed := 0, 0
	for i := 0; i < reads; i++ {
		got, err := dotValues(a, b)
		if err != nil {
			failed++
			continue
		}
		for _, v := range got {
			if v != 2*n {
				wrongReads++
				break
			}
		}
	}
	stop.Store(true)
	wg.Wait()
	if wrongReads != 0 || failed != 0 {
		t.Fatalf("%d of %d reads had wrong values and %d failed", wrongReads, reads, failed)
	}
}

func filled(n int, v float32) []float32 {
	out := make([]float32, n)
	for i := range out {
		out[i] = v
	}
	return out
}
