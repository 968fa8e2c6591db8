// Package deft calls deft, a deep-learning runtime in C11, from Go.
//
// Functions return an error carrying the library's message (an *Error,
// whose kind is also an error value: errors.Is(err, deft.ErrValue)). Arrays,
// symbols and executors hold native handles: Close releases one at once (the
// primary path); a finalizer is the backstop for values dropped without
// Close, and the binding runs a collection when the native bytes that
// dropped arrays may hold grow past a bound (SetNativeGCThreshold). Deferred
// compute and autograd recording are per OS thread in the C library, so
// their scopes (WithDeferredCompute, WithRecording, ...) lock the calling
// goroutine to its thread while they run.
//
// Every method that passes a handle to C keeps its owner reachable until C
// returns (runtime.KeepAlive), so a value whose last use is such a call is
// never finalized while C reads it.
package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"
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

// NDArray is an n-dimensional array, computed asynchronously.
type NDArray struct {
	h      C.DeftNDArrayHandle
	closed atomic.Bool
	lent   bool // lent to a custom operator's callback: deft frees it, not Close
}

// finalizeArray releases a dropped array's handle. Finalizers run one after
// another on one goroutine, often thousands after a collection: they batch
// the frees, one cgo call for up to freeBatch handles. A batch that does not
// fill goes within a millisecond, and at once before anything that counts
// arrays or memory (Counters, WaitAll, ReadMemoryStat, the native bound).
func finalizeArray(a *NDArray) {
	if !a.closed.CompareAndSwap(false, true) {
		return
	}
	dropped.Lock()
	dropped.hs[dropped.n] = a.h
	dropped.n++
	switch {
	case dropped.n == freeBatch:
		flushLocked()
	case dropped.n == 1:
		dropped.timer.Reset(time.Millisecond)
	}
	dropped.Unlock()
	finalized.Add(1)
	noteHandle(-1)
}

const freeBatch = 64

var dropped struct {
	sync.Mutex
	hs    [freeBatch]C.DeftNDArrayHandle
	n     int
	timer *time.Timer
}

func init() {
	dropped.timer = time.AfterFunc(time.Hour, flushDropped)
	dropped.timer.Stop()
}

func flushLocked() {
	if dropped.n > 0 {
		C.go_free_arrays(&dropped.hs[0], C.int(dropped.n))
		dropped.n = 0
	}
}

// flushDropped frees the handles finalizers queued.
func flushDropped() {
	dropped.Lock()
	flushLocked()
	dropped.Unlock()
}

func wrapArray(h C.DeftNDArrayHandle) *NDArray {
	a := &NDArray{h: h}
	runtime.SetFinalizer(a, finalizeArray)
	noteHandle(1)
	return a
}

// raw returns the handle, or ErrClosed. The caller keeps a reachable
// (runtime.KeepAlive) until C is done with the handle.
func (a *NDArray) raw() (C.DeftNDArrayHandle, error) {
	if a == nil {
		return nil, errors.New("deft: nil NDArray")
	}
	if a.closed.Load() {
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
	if !a.closed.CompareAndSwap(false, true) {
		return ErrClosed
	}
	runtime.SetFinalizer(a, nil)
	noteHandle(-1)
	if st := C.go_free_array(a.h); st.kind != 0 {
		return fail(&st)
	}
	return nil
}

func create(dev Device, dtype DType, data unsafe.Pointer, nbytes int, shape []int64) (*NDArray, error) {
	var st C.go_status
	var h C.DeftNDArrayHandle
	var live C.int64_t
	var dims *C.int64_t
	if len(shape) > 0 {
		dims = (*C.int64_t)(unsafe.Pointer(&shape[0]))
	}
	if C.go_create(&st, dims, C.int(len(shape)), C.int(dtype), C.int(dev.Type), C.int(dev.ID),
		data, C.size_t(nbytes), &h, &live) != 0 {
		return nil, fail(&st)
	}
	notePressure(int64(live))
	return wrapArray(h), nil
}

var empty [1]byte

// nonNil keeps "data given" distinct from "zeros wanted" for empty arrays.
func nonNil(p unsafe.Pointer) unsafe.Pointer {
	if p == nil {
		return unsafe.Pointer(&empty[0])
	}
	return p
}

// Zeros makes an array of zeros on the CPU.
func Zeros(dtype DType, shape ...int64) (*NDArray, error) {
	return create(CPU, dtype, nil, 0, shape)
}

// ZerosOn makes an array of zeros on dev.
func ZerosOn(dev Device, dtype DType, shape ...int64) (*NDArray, error) {
	return create(dev, dtype, nil, 0, shape)
}

// Shape returns the dimensions.
func (a *NDArray) Shape() ([]int64, error) {
	h, err := a.raw()
	if err != nil {
		return nil, err
	}
	defer runtime.KeepAlive(a)
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

// DType returns the element type.
func (a *NDArray) DType() (DType, error) {
	h, err := a.raw()
	if err != nil {
		return 0, err
	}
	defer runtime.KeepAlive(a)
	var st C.go_status
	var dtype C.int
	var nbytes C.size_t
	if C.go_describe(&st, h, &dtype, &nbytes) != 0 {
		return 0, fail(&st)
	}
	return DType(dtype), nil
}

// IsLazy reports whether the array waits for deferred compute.
func (a *NDArray) IsLazy() (bool, error) {
	h, err := a.raw()
	if err != nil {
		return false, err
	}
	defer runtime.KeepAlive(a)
	var st C.go_status
	var lazy C.int
	if C.go_is_lazy(&st, h, &lazy) != 0 {
		return false, fail(&st)
	}
	return lazy != 0, nil
}

// Wait blocks until pending writes to the array are done, and returns the
// failure of the computation that wrote it, if any.
func (a *NDArray) Wait() error {
	h, err := a.raw()
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(a)
	var st C.go_status
	if C.go_wait_to_read(&st, h) != 0 {
		return fail(&st)
	}
	return nil
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

// handles returns the arrays' handles (one spare NULL slot at the end, so
// &hs[0] exists); the caller keeps arrays reachable while C uses them.
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

// Invoke runs the operator called name on inputs and returns its outputs,
// however many the operator makes with these parameters.
func Invoke(name string, inputs []*NDArray, params ...Param) ([]*NDArray, error) {
	op, err := lookupOp(name)
	if err != nil {
		return nil, err
	}
	return op.invoke(inputs, params)
}

// InvokeInto runs the operator called name writing into outputs (existing arrays).
func InvokeInto(name string, inputs, outputs []*NDArray, params ...Param) error {
	op, err := lookupOp(name)
	if err != nil {
		return err
	}
	out, err := handles(outputs)
	if err != nil {
		return err
	}
	defer runtime.KeepAlive(outputs)
	_, err = op.call(inputs, out[:len(outputs)], params, nil)
	return err
}

// Call runs operator name with a as its first input and returns its first
// output (the others, if any, are released).
func (a *NDArray) Call(name string, others []*NDArray, params ...Param) (*NDArray, error) {
	return invokeFirst(name, append([]*NDArray{a}, others...), params)
}

// invokeFirst runs the operator called name and returns its first output.
func invokeFirst(name string, inputs []*NDArray, params []Param) (*NDArray, error) {
	op, err := lookupOp(name)
	if err != nil {
		return nil, err
	}
	return op.invokeFirst(inputs, params)
}

// WaitAll blocks until every pending operation is done.
func WaitAll() error {
	flushDropped()
	var st C.go_status
	if C.go_wait_all(&st) != 0 {
		return fail(&st)
	}
	return nil
}

// Counters returns the live NDArray handles and live bytes of CPU storage.
func Counters() (arrays, bytes int64, err error) {
	flushDropped()
	var st C.go_status
	var a, b C.int64_t
	if C.go_counters(&st, &a, &b) != 0 {
		return 0, 0, fail(&st)
	}
	return int64(a), int64(b), nil
}
