//go:build deft_intree

package deft

// With the build tag deft_intree the binding links the CMake build of this
// checkout in its folder "build" (cmake -B build), without pkg-config.

/*
#cgo CFLAGS: -I${SRCDIR}/../../capi/include
#cgo LDFLAGS: -L${SRCDIR}/../../build -Wl,-rpath,${SRCDIR}/../../build -ldeft
*/
import "C"
