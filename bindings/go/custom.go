package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"runtime/cgo"
	"unsafe"
)

// CustomOp is an operator written in Go, registered with RegisterCustomOp.
// Its methods run on deft's callback threads; the arrays they get are lent
// for the call (Close on them does nothing).
type CustomOp interface {
	// InferShape returns the output's shape and dtype from the inputs'.
	InferShape(inShapes [][]int64, inDTypes []DType) ([]int64, DType, error)
	// Forward fills output from inputs (write it with an operator's output, e.g. _copyto).
	Forward(inputs []*NDArray, output *NDArray, isTrain bool) error
	// Backward fills inGrads from the output's gradient (when registered with one).
	Backward(outGrad *NDArray, inputs []*NDArray, output *NDArray, inGrads []*NDArray) error
}

// RegisterCustomOp registers op as operator name with numInputs inputs and
// one output; it is then an operator like any other (Invoke, export, autograd).
func RegisterCustomOp(name string, numInputs int, op CustomOp, hasBackward bool) error {
	cname := C.CString(name)
	defer C.free(unsafe.Pointer(cname))
	h := cgo.NewHandle(op) // kept for good: operators live as long as the process
	back := 0
	if hasBackward {
		back = 1
	}
	var st C.go_status
	if C.go_custom_register(&st, cname, C.int(numInputs), C.uintptr_t(h), C.int(back)) != 0 {
		h.Delete()
		return fail(&st)
	}
	return nil
}

// lent wraps handles deft lends to a callback: no finalizer, Close does nothing.
func lent(hs []C.DeftNDArrayHandle) []*NDArray {
	out := make([]*NDArray, len(hs))
	for i, h := range hs {
		out[i] = &NDArray{h: h, lent: true}
	}
	return out
}

// report turns a callback's error or panic into deft's error for the operator.
func report(call func() error) (status C.int) {
	defer func() {
		if r := recover(); r != nil {
			status = setError(fmt.Sprintf("the Go callback panicked: %v", r))
		}
	}()
	if err := call(); err != nil {
		return setError(err.Error())
	}
	return 0
}

func setError(message string) C.int {
	c := C.CString(message)
	defer C.free(unsafe.Pointer(c))
	C.go_custom_set_error(c)
	return 1
}

//export goCustomInfer
func goCustomInfer(handle C.uintptr_t, nin C.int, inNdims *C.int, inShapes *C.int64_t,
	inDtypes *C.int, outNdim *C.int, outShape *C.int64_t, outDtype *C.int) C.int {
	op := cgo.Handle(handle).Value().(CustomOp)
	ndims := unsafe.Slice(inNdims, int(nin))
	dims := unsafe.Slice(inShapes, int(nin)*8)
	dtypes := unsafe.Slice(inDtypes, int(nin))
	return report(func() error {
		shapes := make([][]int64, nin)
		types := make([]DType, nin)
		for i := range shapes {
			for d := 0; d < int(ndims[i]); d++ {
				shapes[i] = append(shapes[i], int64(dims[i*8+d]))
			}
			types[i] = DType(dtypes[i])
		}
		shape, dtype, err := op.InferShape(shapes, types)
		if err != nil {
			return err
		}
		if len(shape) > 8 {
			return errors.New("the output shape has more than 8 dimensions")
		}
		out := unsafe.Slice(outShape, 8)
		for d, v := range shape {
			out[d] = C.int64_t(v)
		}
		*outNdim, *outDtype = C.int(len(shape)), C.int(dtype)
		return nil
	})
}

//export goCustomForward
func goCustomForward(handle C.uintptr_t, nin C.int, inputs *C.DeftNDArrayHandle,
	output C.DeftNDArrayHandle, isTrain C.int) C.int {
	op := cgo.Handle(handle).Value().(CustomOp)
	in := lent(unsafe.Slice(inputs, int(nin)))
	out := lent([]C.DeftNDArrayHandle{output})[0]
	return report(func() error { return op.Forward(in, out, isTrain != 0) })
}

//export goCustomBackward
func goCustomBackward(handle C.uintptr_t, outGrad C.DeftNDArrayHandle, nin C.int,
	inputs *C.DeftNDArrayHandle, output C.DeftNDArrayHandle, inGrads *C.DeftNDArrayHandle) C.int {
	op := cgo.Handle(handle).Value().(CustomOp)
	in := lent(unsafe.Slice(inputs, int(nin)))
	grads := lent(unsafe.Slice(inGrads, int(nin)))
	single := lent([]C.DeftNDArrayHandle{outGrad, output})
	return report(func() error { return op.Backward(single[0], in, single[1], grads) })
}
