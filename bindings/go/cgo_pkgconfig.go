//go:build !deft_intree

package deft

// deft's compiler and linker flags come from pkg-config's deft.pc: the one
// `cmake --install` writes under <prefix>/lib/pkgconfig, or the one a CMake
// build of the checkout writes under <build>/pkgconfig (it points at the
// build's libdeft.so and the checkout's headers). Point PKG_CONFIG_PATH at
// the folder unless it is one pkg-config searches already (/usr/local).
// Both carry an rpath, so programs run without LD_LIBRARY_PATH. The build
// tag deft_intree links <checkout>/build instead, without pkg-config.

/*
#cgo pkg-config: deft
*/
import "C"
