// Package deft calls deft, a deep-learning runtime in C11, from Go.
//
// Functions return an error carrying the library's message. Arrays, symbols
// and executors hold native handles: Close releases one at once (the primary
// path); a finalizer is the backstop for values dropped without Close.
// Deferred compute and autograd recording are per OS thread in the C
// library, so their scopes (WithDeferredCompute, WithRecording) lock the
// calling goroutine to its thread while they run.
package deft

/*
#cgo CFLAGS: -I${SRCDIR}/../../capi/include
#cgo LDFLAGS: -ldeft
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"unsafe"
)

// ErrorKind is the category of a failure, as the C library reports it.
type ErrorKind int

const (
	ErrValue          ErrorKind = 1
	ErrType           ErrorKind = 2
	ErrIndex          ErrorKind = 3
	ErrNotImplemented ErrorKind = 4
	ErrOutOfMemory    ErrorKind = 5
	ErrParse          ErrorKind = 6
	ErrInternal       ErrorKind = 7
)

// Error is a failed call: its kind and the message naming what was wrong.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return e.Message }

// ErrClosed is returned by methods of a value that was closed.
var ErrClosed = errors.New("deft: the value was closed")

func fail(st *C.go_status) error {
	return &Error{Kind: ErrorKind(st.kind), Message: C.GoString(&st.message[0])}
}

// DType is an element type.
type DType int

const (
	Float32 DType = 0
	Float64 DType = 1
	Int32   DType = 4
	Int64   DType = 6
)

// handle is a native handle released exactly once, by Close or the finalizer.
type handle struct {
	mu     sync.Mutex
	closed bool
}

// release runs free once; later calls return ErrClosed. owner is the object
// whose finalizer is cleared.
func (h *handle) release(owner interface{}, free func(*C.go_status) C.int) error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return ErrClosed
	}
	h.closed = true
	runtime.SetFinalizer(owner, nil)
	var st C.go_status
	if free(&st) != 0 {
		return fail(&st)
	}
	return nil
}

// NDArray is an n-dimensional array on the CPU, computed asynchronously.
type NDArray struct {
	handle
	h    C.DeftNDArrayHandle
	lent bool // lent to a custom operator's callback: deft frees it, not Close
}

func wrapArray(h C.DeftNDArrayHandle) *NDArray {
	a := &NDArray{h: h}
	runtime.SetFinalizer(a, func(a *NDArray) { a.Close() })
	return a
}

// raw returns the handle, or ErrClosed.
func (a *NDArray) raw() (C.DeftNDArrayHandle, error) {
	if a == nil {
		return nil, errors.New("deft: nil NDArray")
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.closed {
		return nil, ErrClosed
	}
	return a.h, nil
}

// Close releases the array's handle; the data lives on while pending work
// or recorded graphs still need it. A second Close returns ErrClosed.
func (a *NDArray) Close() error {
	if a.lent {
		return nil
	}
	return a.release(a, func(st *C.go_status) C.int { return C.go_free(st, a.h) })
}

func create(dtype DType, data unsafe.Pointer, nbytes int, shape []int64) (*NDArray, error) {
	var st C.go_status
	var h C.DeftNDArrayHandle
	var dims *C.int64_t
	if len(shape) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	if C.go_create(&st, dims, C.int(len(shape)), C.int(dtype), data, C.size_t(nbytes), &h) != 0 {
		return nil, fail(&st)
	}
	return wrapArray(h), nil
}

// FromFloat32 makes an array holding a copy of data, in row-major order.
func FromFloat32(data []float32, shape ...int64) (*NDArray, error) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	return create(Float32, nonNil(p), len(data)*4, shape)
}

// FromFloat64 makes an array holding a copy of data, in row-major order.
func FromFloat64(data []float64, shape ...int64) (*NDArray, error) {
	var p unsafe.Pointer
	if len(data) > 0 {
		p = unsafe.Pointer(&data[0])
	}
	return create(Float64, nonNil(p), len(data)*8, shape)
}

var empty [1]byte

// nonNil keeps "data given" distinct from "zeros wanted" for empty arrays.
func nonNil(p unsafe.Pointer) unsafe.Pointer {
	if p == nil {
		return unsafe.Pointer(&empty[0])
	}
	return p
}

// Zeros makes an array of zeros.
func Zeros(dtype DType, shape ...int64) (*NDArray, error) {
	return create(dtype, nil, 0, shape)
}

// Shape returns the dimensions.
func (a *NDArray) Shape() ([]int64, error) {
	h, err := a.raw()
	if err != nil {
		return nil, err
	}
	var st C.go_status
	var dims [8]C.int64_t
	var ndim C.int
	if C.go_shape(&st, h, &dims[0], &ndim) != 0 {
		return nil, fail(&st)
	}
	out := make([]int64, ndim)
	for i := range out {
		out[i] = int64(dims[i])
	}
	return out, nil
}

// IsLazy reports whether the array waits for deferred compute.
func (a *NDArray) IsLazy() (bool, error) {
	h, err := a.raw()
	if err != nil {
		return false, err
	}
	var st C.go_status
	var lazy C.int
	if C.go_is_lazy(&st, h, &lazy) != 0 {
		return false, fail(&st)
	}
	return lazy != 0, nil
}

func (a *NDArray) read(want DType, dst unsafe.Pointer, nbytes int) error {
	h, err := a.raw()
	if err != nil {
		return err
	}
	var st C.go_status
	var dtype C.int
	if C.go_dtype(&st, h, &dtype) != 0 {
		return fail(&st)
	}
	if DType(dtype) != want {
		return fmt.Errorf("deft: the array's dtype is %d, not %d", int(dtype), int(want))
	}
	if C.go_to_host(&st, h, nonNil(dst), C.size_t(nbytes)) != 0 {
		return fail(&st)
	}
	return nil
}

func (a *NDArray) count() (int, error) {
	h, err := a.raw()
	if err != nil {
		return 0, err
	}
	var st C.go_status
	var nbytes C.size_t
	if C.go_nbytes(&st, h, &nbytes) != 0 {
		return 0, fail(&st)
	}
	return int(nbytes), nil
}

// Float32s returns the values of a float32 array (waiting for pending work).
func (a *NDArray) Float32s() ([]float32, error) {
	n, err := a.count()
	if err != nil {
		return nil, err
	}
	out := make([]float32, n/4)
	var p unsafe.Pointer
	if len(out) > 0 {
		p = unsafe.Pointer(&out[0])
	}
	return out, a.read(Float32, p, n)
}

// Float64s returns the values of a float64 array (waiting for pending work).
func (a *NDArray) Float64s() ([]float64, error) {
	n, err := a.count()
	if err != nil {
		return nil, err
	}
	out := make([]float64, n/8)
	var p unsafe.Pointer
	if len(out) > 0 {
		p = unsafe.Pointer(&out[0])
	}
	return out, a.read(Float64, p, n)
}

// Param is an operator parameter, as MXNet writes them: {"axis", "(0,1)"}.
type Param struct{ Key, Value string }

// cStrings copies strings into C memory; free releases them.
func cStrings(texts []string) (ptrs []*C.char, free func()) {
	ptrs = make([]*C.char, len(texts)+1)
	for i, t := range texts {
		ptrs[i] = C.CString(t)
	}
	return ptrs, func() {
		for _, p := range ptrs {
			C.free(unsafe.Pointer(p))
		}
	}
}

func handles(arrays []*NDArray) ([]C.DeftNDArrayHandle, error) {
	hs := make([]C.DeftNDArrayHandle, len(arrays)+1)
	for i, a := range arrays {
		h, err := a.raw()
		if err != nil {
			return nil, fmt.Errorf("deft: input %d: %w", i, err)
		}
		hs[i] = h
	}
	return hs, nil
}

// Invoke runs the operator called name on inputs and returns its outputs.
func Invoke(name string, inputs []*NDArray, params ...Param) ([]*NDArray, error) {
	out := make([]C.DeftNDArrayHandle, 16)
	n, err := invoke(name, inputs, out, params)
	if err != nil {
		return nil, err
	}
	results := make([]*NDArray, n)
	for i := range results {
		results[i] = wrapArray(out[i])
	}
	return results, nil
}

// InvokeInto runs the operator called name writing into outputs (existing arrays).
func InvokeInto(name string, inputs, outputs []*NDArray, params ...Param) error {
	out, err := handles(outputs)
	if err != nil {
		return err
	}
	_, err = invoke(name, inputs, out[:len(outputs)], params)
	runtime.KeepAlive(outputs)
	return err
}

// invoke makes the C call: nil entries of out receive new arrays; it returns their count.
func invoke(name string, inputs []*NDArray, out []C.DeftNDArrayHandle, params []Param) (int, error) {
	in, err := handles(inputs)
	if err != nil {
		return 0, err
	}
	keys := make([]string, len(params))
	vals := make([]string, len(params))
	for i, p := range params {
		keys[i], vals[i] = p.Key, p.Value
	}
	ckeys, freeKeys := cStrings(keys)
	defer freeKeys()
	cvals, freeVals := cStrings(vals)
	defer freeVals()
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	var st C.go_status
	nout := C.int(len(out))
	var first *C.DeftNDArrayHandle
	if len(out) > 0 {
		first = &out[0]
	}
	if C.go_invoke(&st, cname, C.int(len(inputs)), &in[0], &nout, first, C.int(len(params)),
		&ckeys[0], &cvals[0]) != 0 {
		return 0, fail(&st)
	}
	runtime.KeepAlive(inputs)
	return int(nout), nil
}

// Call runs operator name with a as its first input and returns its one output.
func (a *NDArray) Call(name string, others []*NDArray, params ...Param) (*NDArray, error) {
	outs, err := Invoke(name, append([]*NDArray{a}, others...), params...)
	if err != nil {
		return nil, err
	}
	return outs[0], nil
}

// withMode runs fn with a per-thread mode switched on, on one locked OS thread.
func withMode(set func(*C.go_status, C.int, *C.int) C.int, fn func() error) error {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	var st C.go_status
	var prev C.int
	if set(&st, 1, &prev) != 0 {
		return fail(&st)
	}
	defer set(&st, prev, &prev)
	return fn()
}

// WithDeferredCompute runs fn with deferred compute on: operator calls record
// a graph and return lazy arrays, computed when read.
func WithDeferredCompute(fn func() error) error {
	return withMode(func(st *C.go_status, on C.int, prev *C.int) C.int {
		return C.go_set_deferred(st, on, prev)
	}, fn)
}

// WithRecording runs fn with autograd recording on.
func WithRecording(fn func() error) error {
	return withMode(func(st *C.go_status, on C.int, prev *C.int) C.int {
		return C.go_set_recording(st, on, prev)
	}, fn)
}

// AttachGrad makes a a variable; Backward writes its gradient into the result.
func (a *NDArray) AttachGrad() (*NDArray, error) {
	h, err := a.raw()
	if err != nil {
		return nil, err
	}
	grads, err := Invoke("zeros_like", []*NDArray{a})
	if err != nil {
		return nil, err
	}
	var st C.go_status
	if C.go_mark(&st, h, grads[0].h) != 0 {
		return nil, fail(&st)
	}
	return grads[0], nil
}

// Backward computes the gradients of heads into the variables' gradient arrays.
func Backward(heads ...*NDArray) error {
	hs, err := handles(heads)
	if err != nil {
		return err
	}
	var st C.go_status
	if C.go_backward(&st, C.int(len(heads)), &hs[0]) != 0 {
		return fail(&st)
	}
	runtime.KeepAlive(heads)
	return nil
}

// WaitAll blocks until every pending operation is done.
func WaitAll() error {
	var st C.go_status
	if C.go_wait_all(&st) != 0 {
		return fail(&st)
	}
	return nil
}

// GPUCount is the number of GPUs deft can use: 0 without CUDA, a driver or a GPU.
func GPUCount() (int, error) {
	var st C.go_status
	var n C.int
	if C.go_gpu_count(&st, &n) != 0 {
		return 0, fail(&st)
	}
	return int(n), nil
}

// Counters returns the live NDArray handles and live bytes of CPU storage.
func Counters() (arrays, bytes int64, err error) {
	var st C.go_status
	var a, b C.int64_t
	if C.go_counters(&st, &a, &b) != 0 {
		return 0, 0, fail(&st)
	}
	return int64(a), int64(b), nil
}
