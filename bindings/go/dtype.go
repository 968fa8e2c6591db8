package deft

/*
#include "shim.h"
*/
import "C"

import (
	"fmt"
	"runtime"
	"unsafe"
)

// DType is an element type; the numbers are deft's (and MXNet's) type flags.
type DType int

const (
	Float32  DType = 0
	Float64  DType = 1
	Float16  DType = 2 // read and written as raw bits: Float16Bits, FromFloat16Bits
	Uint8    DType = 3
	Int32    DType = 4
	Int8     DType = 5
	Int64    DType = 6
	Bool     DType = 7
	BFloat16 DType = 12 // read and written as raw bits: BFloat16Bits, FromBFloat16Bits
)

var dtypeNames = map[DType]string{
	Float32: "float32", Float64: "float64", Float16: "float16", Uint8: "uint8", Int32: "int32",
	Int8: "int8", Int64: "int64", Bool: "bool", BFloat16: "bfloat16",
}

// String is deft's name of the dtype: "float32", "int64", ...
func (d DType) String() string {
	if name, ok := dtypeNames[d]; ok {
		return name
	}
	return fmt.Sprintf("DType(%d)", int(d))
}

// element is a Go type that holds one of deft's dtypes bit for bit.
type element interface {
	~float32 | ~float64 | ~uint8 | ~int8 | ~int32 | ~int64 | ~uint16 | ~bool
}

// fromSlice makes an array of dtype holding a copy of data.
func fromSlice[T element](dtype DType, data []T, shape []int64) (*NDArray, error) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	var zero T
	return create(CPU, dtype, nonNil(p), len(data)*int(unsafe.Sizeof(zero)), shape)
}

// FromFloat32 makes an array holding a copy of data, in row-major order.
func FromFloat32(data []float32, shape ...int64) (*NDArray, error) {
	return fromSlice(Float32, data, shape)
}

// FromFloat64 makes a float64 array holding a copy of data.
func FromFloat64(data []float64, shape ...int64) (*NDArray, error) {
	return fromSlice(Float64, data, shape)
}

// FromInt32 makes an int32 array holding a copy of data.
func FromInt32(data []int32, shape ...int64) (*NDArray, error) {
	return fromSlice(Int32, data, shape)
}

// FromInt64 makes an int64 array holding a copy of data.
func FromInt64(data []int64, shape ...int64) (*NDArray, error) {
	return fromSlice(Int64, data, shape)
}

// FromInt8 makes an int8 array holding a copy of data.
func FromInt8(data []int8, shape ...int64) (*NDArray, error) {
	return fromSlice(Int8, data, shape)
}

// FromUint8 makes a uint8 array holding a copy of data.
func FromUint8(data []uint8, shape ...int64) (*NDArray, error) {
	return fromSlice(Uint8, data, shape)
}

// FromBool makes a bool array holding a copy of data.
func FromBool(data []bool, shape ...int64) (*NDArray, error) {
	return fromSlice(Bool, data, shape)
}

// FromFloat16Bits makes a float16 array from IEEE half-precision bit patterns.
func FromFloat16Bits(data []uint16, shape ...int64) (*NDArray, error) {
	return fromSlice(Float16, data, shape)
}

// FromBFloat16Bits makes a bfloat16 array from bfloat16 bit patterns.
func FromBFloat16Bits(data []uint16, shape ...int64) (*NDArray, error) {
	return fromSlice(BFloat16, data, shape)
}

// readAs copies the values out (waiting for pending work) if the array's
// dtype is want; otherwise it returns a *DTypeError.
func readAs[T element](a *NDArray, want DType) ([]T, error) {
	h, err := a.raw()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(a)
	var st C.go_status
	var dtype C.int
	var nbytes C.size_t
	if C.go_describe(&st, h, &dtype, &nbytes) != 0 {
		return nil, fail(&st)
	}
	if DType(dtype) != want {
		return nil, &DTypeError{Have: DType(dtype), Want: want}
	}
	var zero T
	out := make([]T, int(nbytes)/int(unsafe.Sizeof(zero)))
	var p unsafe.Pointer
	if len(out) > 0 {
		p = unsafe.Pointer(&out[0])
	}
	if C.go_to_host(&st, h, nonNil(p), nbytes) != 0 {
		return nil, fail(&st)
	}
	return out, nil
}

// Float32s returns the values of a float32 array (waiting for pending work);
// a *DTypeError (an ErrType) for another dtype. The other readers alike.
func (a *NDArray) Float32s() ([]float32, error) { return readAs[float32](a, Float32) }

// Float64s returns the values of a float64 array.
func (a *NDArray) Float64s() ([]float64, error) { return readAs[float64](a, Float64) }

// Int32s returns the values of an int32 array.
func (a *NDArray) Int32s() ([]int32, error) { return readAs[int32](a, Int32) }

// Int64s returns the values of an int64 array.
func (a *NDArray) Int64s() ([]int64, error) { return readAs[int64](a, Int64) }

// Int8s returns the values of an int8 array.
func (a *NDArray) Int8s() ([]int8, error) { return readAs[int8](a, Int8) }

// Uint8s returns the values of a uint8 array.
func (a *NDArray) Uint8s() ([]uint8, error) { return readAs[uint8](a, Uint8) }

// Bools returns the values of a bool array.
func (a *NDArray) Bools() ([]bool, error) { return readAs[bool](a, Bool) }

// Float16Bits returns the IEEE half-precision bit patterns of a float16 array.
func (a *NDArray) Float16Bits() ([]uint16, error) { return readAs[uint16](a, Float16) }

// BFloat16Bits returns the bit patterns of a bfloat16 array.
func (a *NDArray) BFloat16Bits() ([]uint16, error) { return readAs[uint16](a, BFloat16) }
