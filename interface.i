/*
 * The SWIG interface over deft's public C API, shared by every binding.
 *
 * Each handle type becomes a class whose destructor calls the matching
 * Deft*Free, so a host object that owns a handle frees it when the host
 * language drops it. Operators are static: their handles own nothing.
 * How C arrays, out-parameters and status codes look in each language is
 * that language's typemap file, included below.
 */
%module deft

%{
#include <deft/c_api.h>
%}

%include <stdint.i>

#ifdef SWIGPYTHON
%include "bindings/python/typemaps.i"
#endif
#ifdef SWIGJAVA
%include "bindings/java/typemaps.i"
#endif

/* The handles' structs are opaque in C: SWIG must not make or free them itself. */
%nodefaultctor DeftNDArray;
%nodefaultctor DeftSymbol;
%nodefaultctor DeftCachedOp;
%nodefaultctor DeftOp;
%nodefaultdtor DeftOp;
struct DeftNDArray {};
struct DeftSymbol {};
struct DeftCachedOp {};
struct DeftOp {};
%nodefaultctor DeftProfileDomain;
%nodefaultctor DeftProfileObject;
struct DeftProfileDomain {};
struct DeftProfileObject {};
%extend DeftNDArray {
    ~DeftNDArray() { DeftNDArrayFree($self); }
}
%extend DeftSymbol {
    ~DeftSymbol() { DeftSymbolFree($self); }
}
%extend DeftCachedOp {
    ~DeftCachedOp() { DeftCachedOpFree($self); }
}
%extend DeftProfileDomain {
    ~DeftProfileDomain() { DeftProfileDomainFree($self); }
}
%extend DeftProfileObject {
    ~DeftProfileObject() { DeftProfileObjectFree($self); }
}

/* Freeing is the destructors' job: a second path would free twice. */
%ignore DeftNDArrayFree;
%ignore DeftSymbolFree;
%ignore DeftCachedOpFree;
%ignore DeftProfileDomainFree;
%ignore DeftProfileObjectFree;
%ignore DLManagedTensor;
/* Function pointers for a binding's own C code (Python's GIL hooks), not for its users. */
%ignore DeftSetBlockingHooks;


%include "deft/base.h"
%include "deft/ndarray.h"
%include "deft/op.h"
%include "deft/symbol.h"
%include "deft/executor.h"
%include "deft/deferred.h"
%include "deft/autograd.h"
%include "deft/dlpack.h"
%include "deft/profiler.h"
%include "deft/extension.h"
