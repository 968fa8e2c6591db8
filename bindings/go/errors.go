package deft

/*
#include <stdlib.h>
#include "shim.h"
*/
import "C"

import (
	"errors"
	"fmt"
	"unsafe"
)

// ErrorKind is the category of a failure, as the C library reports it. Each
// kind is also an error value, so errors.Is(err, deft.ErrValue) tells a
// failure's category (as syscall.Errno does), and errors.As(err, &e) with
// e a *deft.Error gives the message.
type ErrorKind int

const (
	ErrValue          ErrorKind = 1 // a bad argument value
	ErrType           ErrorKind = 2 // a wrong data type or handle type
	ErrIndex          ErrorKind = 3 // an index or axis out of range
	ErrNotImplemented ErrorKind = 4 // valid, but not supported by this build
	ErrOutOfMemory    ErrorKind = 5 // an allocation failed
	ErrParse          ErrorKind = 6 // a string (parameter, JSON) did not parse
	ErrInternal       ErrorKind = 7 // a bug in deft
)

var kindNames = map[ErrorKind]string{
	ErrValue: "value error", ErrType: "type error", ErrIndex: "index error",
	ErrNotImplemented: "not implemented", ErrOutOfMemory: "out of memory",
	ErrParse: "parse error", ErrInternal: "internal error",
}

// String names the kind: "value error", "type error", ...
func (k ErrorKind) String() string {
	if name, ok := kindNames[k]; ok {
		return name
	}
	return fmt.Sprintf("ErrorKind(%d)", int(k))
}

// Error makes the kind a sentinel error: "deft: value error".
func (k ErrorKind) Error() string { return "deft: " + k.String() }

// Error is a failed call: its kind and the message naming what was wrong.
type Error struct {
	Kind    ErrorKind
	Message string
}

func (e *Error) Error() string { return e.Message }

// Is reports whether target is e's kind, for errors.Is(err, deft.ErrValue).
func (e *Error) Is(target error) bool {
	k, ok := target.(ErrorKind)
	return ok && k == e.Kind
}

// DTypeError is a read or write of an array as a dtype it does not have. It
// is an ErrType: errors.Is(err, deft.ErrType) holds.
type DTypeError struct {
	Have, Want DType
}

func (e *DTypeError) Error() string {
	return fmt.Sprintf("deft: the array's dtype is %v, not %v", e.Have, e.Want)
}

// Is makes a DTypeError an ErrType.
func (e *DTypeError) Is(target error) bool { return target == ErrType }

// ErrClosed is returned by methods of a value that was closed.
var ErrClosed = errors.New("deft: the value was closed")

// fail turns a failed shim call's status into an *Error, freeing its message.
func fail(st *C.go_status) error {
	if st.message == nil {
		return &Error{Kind: ErrOutOfMemory, Message: "deft: out of memory copying an error message"}
	}
	defer C.free(unsafe.Pointer(st.message))
	return &Error{Kind: ErrorKind(st.kind), Message: C.GoString(st.message)}
}
