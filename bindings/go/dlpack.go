package deft

/*
#include "shim.h"
*/
import "C"

import (
	"runtime"
	"unsafe"
)

// DLPackView is an array's memory lent through DLPack: Data views it
// without a copy, valid until Close (the finalizer is the backstop). The
// view holds its own reference, so the array may be closed first.
type DLPackView struct {
	handle
	t     *C.DLManagedTensor
	data  unsafe.Pointer
	count int
	dtype DType
}

// ToDLPack lends the array's memory (computed first if lazy or pending).
func (a *NDArray) ToDLPack() (*DLPackView, error) {
	h, err := a.raw()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(a)
	var st C.go_status
	var t *C.DLManagedTensor
	var data unsafe.Pointer
	var count C.int64_t
	var dtype C.int
	if C.go_to_dlpack(&st, h, &t, &data, &count, &dtype) != 0 {
		return nil, fail(&st)
	}
	v := &DLPackView{t: t, data: data, count: int(count), dtype: DType(dtype)}
	runtime.SetFinalizer(v, func(v *DLPackView) { v.Close() })
	return v, nil
}

// Close gives the memory back (the tensor's deleter).
func (v *DLPackView) Close() error {
	return v.release(v, func(*C.go_status) C.int {
		C.go_dlpack_delete(v.t)
		return 0
	})
}

// viewAs returns the memory as a []T if the dtype is want; the slice is
// valid while v is open (keep v reachable, e.g. runtime.KeepAlive(v)).
func viewAs[T element](v *DLPackView, want DType) ([]T, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, ErrClosed
	}
	if v.dtype != want {
		return nil, &DTypeError{Have: v.dtype, Want: want}
	}
	if v.count == 0 {
		return []T{}, nil
	}
	return unsafe.Slice((*T)(v.data), v.count), nil
}

// Float32s views a float32 array's memory, without a copy. Writes through
// the slice change the array. The slice is valid until v is closed or
// finalized: keep v reachable while using it (runtime.KeepAlive(v)).
func (v *DLPackView) Float32s() ([]float32, error) { return viewAs[float32](v, Float32) }

// Float64s views a float64 array's memory (see Float32s).
func (v *DLPackView) Float64s() ([]float64, error) { return viewAs[float64](v, Float64) }

// Int32s views an int32 array's memory (see Float32s).
func (v *DLPackView) Int32s() ([]int32, error) { return viewAs[int32](v, Int32) }

// Int64s views an int64 array's memory (see Float32s).
func (v *DLPackView) Int64s() ([]int64, error) { return viewAs[int64](v, Int64) }

// Uint8s views a uint8 array's memory (see Float32s).
func (v *DLPackView) Uint8s() ([]uint8, error) { return viewAs[uint8](v, Uint8) }

// FromDLPack makes an array over the memory of another view (a DLPack
// tensor deft or another library lent), without a copy: the array takes
// the tensor over, and v is closed.
func FromDLPack(v *DLPackView) (*NDArray, error) {
	v.mu.Lock()
	defer v.mu.Unlock()
	if v.closed {
		return nil, ErrClosed
	}
	var st C.go_status
	var h C.DeftNDArrayHandle
	if C.go_from_dlpack(&st, v.t, &h) != 0 {
		return nil, fail(&st)
	}
	v.closed = true // the array owns the tensor now
	runtime.SetFinalizer(v, nil)
	return wrapArray(h), nil
}
