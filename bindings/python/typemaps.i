/*
 * How deft's C API looks from Python (included by interface.i).
 *
 * - A status of -1 raises the deft exception matching DeftGetLastErrorKind(),
 *   with DeftGetLastError()'s text, read in the same call; 0 returns None or
 *   the out-parameters (one value alone, several as a list).
 * - Out-parameters disappear from the Python signature and come back as
 *   results; new handles come back owned (freed when Python drops them).
 * - C arrays are Python sequences (None for NULL); counts stay explicit.
 *   Objects carrying a handle in a `this` attribute pass as that handle.
 * - Calls that may wait for the engine release the GIL, so engine threads
 *   and other Python threads make progress meanwhile.
 */

%{
#include <stdlib.h>

/* Exception classes by DeftErrorKind; [0] is the base class DeftError. */
static PyObject *deft_py_errors[8];

static void deft_py_raise(void) {
    int kind = DeftGetLastErrorKind();
    PyObject *type = kind > 0 && kind < 8 && deft_py_errors[kind] ? deft_py_errors[kind]
                                                                  : deft_py_errors[0];
    PyErr_SetString(type, DeftGetLastError());
}

static PyObject *deft_py_error_class(PyObject *module, const char *name, PyObject *bases) {
    char qualified[64];
    snprintf(qualified, sizeof qualified, "deft.%s", name);
    PyObject *cls = PyErr_NewException(qualified, bases, NULL);
    Py_XDECREF(bases);
    if (cls && PyModule_AddObjectRef(module, name, cls) != 0) Py_CLEAR(cls);
    return cls;
}

static int deft_py_init_errors(PyObject *module) {
    PyObject *base = deft_py_error_class(module, "DeftError", NULL);
    if (!base) return -1;
    deft_py_errors[0] = deft_py_errors[DEFT_ERROR_INTERNAL] = base;
    static const struct {
        int kind;
        const char *name;
    } kinds[] = {{DEFT_ERROR_VALUE, "DeftValueError"},
                 {DEFT_ERROR_TYPE, "DeftTypeError"},
                 {DEFT_ERROR_INDEX, "DeftIndexError"},
                 {DEFT_ERROR_NOT_IMPLEMENTED, "DeftNotImplementedError"},
                 {DEFT_ERROR_OUT_OF_MEMORY, "DeftMemoryError"}};
    PyObject *builtins[] = {PyExc_ValueError, PyExc_TypeError, PyExc_IndexError,
                            PyExc_NotImplementedError, PyExc_MemoryError};
    for (int i = 0; i < 5; i++) {
        PyObject *cls = deft_py_error_class(module, kinds[i].name,
                                            PyTuple_Pack(2, base, builtins[i]));
        if (!cls) return -1;
        deft_py_errors[kinds[i].kind] = cls;
    }
    /* A string that did not parse is a bad value, as Python's int("x") is. */
    PyObject *parse = deft_py_error_class(module, "DeftParseError",
                                          PyTuple_Pack(1, deft_py_errors[DEFT_ERROR_VALUE]));
    if (!parse) return -1;
    deft_py_errors[DEFT_ERROR_PARSE] = parse;
    return 0;
}

/*
 * The handle inside obj: a SWIG handle object, or an object keeping one in
 * its `this` attribute (deft.NDArray, deft.Symbol, ...); NULL for None. -1
 * with a TypeError naming the argument (`what`, or `what`[index]).
 */
static int deft_py_handle(PyObject *obj, swig_type_info *type, const char *what, Py_ssize_t index,
                          void **out) {
    if (obj == Py_None) {
        *out = NULL;
        return 0;
    }
    if (SWIG_IsOK(SWIG_ConvertPtr(obj, out, type, 0))) return 0;
    static PyObject *this_name;
    if (!this_name && !(this_name = PyUnicode_InternFromString("this"))) return -1;
    PyObject *inner = PyObject_GetAttr(obj, this_name);
    if (inner) {
        /* obj keeps inner alive, so the pointer stays valid after the decref */
        int ok = SWIG_IsOK(SWIG_ConvertPtr(inner, out, type, 0));
        Py_DECREF(inner);
        if (ok) return 0;
    } else {
        PyErr_Clear();
    }
    if (index >= 0)
        PyErr_Format(PyExc_TypeError, "%s[%zd] is %s, expected a deft %s", what, index,
                     Py_TYPE(obj)->tp_name, type->str);
    else
        PyErr_Format(PyExc_TypeError, "%s is %s, expected a deft %s", what,
                     Py_TYPE(obj)->tp_name, type->str);
    return -1;
}

/* A C array of handles from a sequence; *heap is set when it did not fit `small`. */
static int deft_py_handles(PyObject *input, swig_type_info *type, const char *what, void **small,
                           Py_ssize_t room, void ***out, void ***heap) {
    *out = NULL;
    if (input == Py_None) return 0;
    PyObject *seq = PySequence_Fast(input, "expected a sequence of handles");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    void **items = n <= room ? small : (*heap = malloc((size_t)(n ? n : 1) * sizeof(void *)));
    int status = items ? 0 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0; status == 0 && i < n; i++)
        status = deft_py_handle(PySequence_Fast_GET_ITEM(seq, i), type, what, i, &items[i]);
    Py_DECREF(seq);
    if (status == 0) *out = items;
    return status;
}

/* A C array of UTF-8 strings; `seq` keeps the Python strings (and so the text) alive. */
static int deft_py_strings(PyObject *input, const char **small, Py_ssize_t room, PyObject **seq,
                           const char ***out, const char ***heap) {
    *out = NULL;
    if (input == Py_None) return 0;
    if (!(*seq = PySequence_Fast(input, "expected a sequence of strings"))) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(*seq);
    const char **items = n <= room ? small : (*heap = malloc((size_t)(n ? n : 1) * sizeof(char *)));
    if (!items) return PyErr_NoMemory(), -1;
    for (Py_ssize_t i = 0; i < n; i++) {
        PyObject *item = PySequence_Fast_GET_ITEM(*seq, i);
        if (!PyUnicode_Check(item)) {
            PyErr_Format(PyExc_TypeError, "item %zd is %s, expected str", i, Py_TYPE(item)->tp_name);
            return -1;
        }
        if (!(items[i] = PyUnicode_AsUTF8(item))) return -1;
    }
    *out = items;
    return 0;
}

/* A C array of integers (int or int64_t, by `wide`). */
static int deft_py_ints(PyObject *input, int wide, void *small, Py_ssize_t room, void **out,
                        void **heap) {
    *out = NULL;
    if (input == Py_None) return 0;
    PyObject *seq = PySequence_Fast(input, "expected a sequence of integers");
    if (!seq) return -1;
    Py_ssize_t n = PySequence_Fast_GET_SIZE(seq);
    size_t size = wide ? sizeof(int64_t) : sizeof(int);
    void *items = n <= room ? small : (*heap = malloc((size_t)(n ? n : 1) * size));
    int status = items ? 0 : (PyErr_NoMemory(), -1);
    for (Py_ssize_t i = 0; status == 0 && i < n; i++) {
        long long v = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, i));
        if (v == -1 && PyErr_Occurred()) status = -1;
        else if (wide) ((int64_t *)items)[i] = v;
        else if (v < INT32_MIN || v > INT32_MAX)
            status = (PyErr_Format(PyExc_OverflowError, "item %zd (%lld) does not fit in an int",
                                   i, v), -1);
        else ((int *)items)[i] = (int)v;
    }
    Py_DECREF(seq);
    if (status == 0) *out = items;
    return status;
}

static PyObject *deft_py_str(const char *s) {
    return s ? PyUnicode_FromString(s) : SWIG_Py_Void();
}

static PyObject *deft_py_str_list(int n, const char *const *names) {
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) {
        PyObject *s = deft_py_str(names[i]);
        if (!s) Py_CLEAR(list);
        else PyList_SET_ITEM(list, i, s);
    }
    return list;
}

static PyObject *deft_py_tuple64(const int64_t *v, int n) {
    PyObject *t = PyTuple_New(n < 0 ? 0 : n);
    for (int i = 0; t && i < n; i++) {
        PyObject *d = PyLong_FromLongLong(v[i]);
        if (!d) Py_CLEAR(t);
        else PyTuple_SET_ITEM(t, i, d);
    }
    return t;
}

/* A capsule over an exported DLPack tensor; runs the deleter unless a consumer took it. */
static void deft_py_capsule_free(PyObject *capsule) {
    if (!PyCapsule_IsValid(capsule, "dltensor")) return; /* consumed: "used_dltensor" */
    DLManagedTensor *t = PyCapsule_GetPointer(capsule, "dltensor");
    if (t && t->deleter) t->deleter(t);
}
%}

/*
 * OpFunction: deft.nd's typed operator functions (nd.relu(x), nd.sum(x,
 * axis=1)), as callables whose common call runs in C: arrays for inputs (as
 * many as the operator takes), parameters by keyword with int, float or str
 * values. That call costs what the C API does, and less than the operators'
 * own x + 1. Anything else, and any call that C refuses, goes to `slow`, the
 * Python function that does the whole job (lists, NumPy arrays, out=,
 * positional parameters, error messages). Instances keep a __dict__ so that
 * they carry __name__, __doc__ and __signature__ as functions do.
 */
%{
typedef struct {
    PyObject_HEAD
    PyObject *dict;
    DeftOpHandle op;
    PyObject *params;     /* the operator's parameter names (a set) */
    Py_ssize_t most;      /* inputs the operator takes at most */
    PyObject *slow;       /* (*inputs, **params) -> result */
    PyTypeObject *array;  /* deft.NDArray */
} deft_py_op_fn;

static PyObject *deft_py_this_name, *deft_py_grad_name;

/* The text of a parameter value the fast call takes; NULL (no error) for others. */
static PyObject *deft_py_fast_text(PyObject *value) {
    if (PyLong_CheckExact(value)) return PyObject_Str(value);
    if (PyFloat_CheckExact(value)) return PyObject_Repr(value);
    if (PyUnicode_CheckExact(value)) return Py_NewRef(value);
    return NULL;
}

/* The results as deft.NDArray objects, made as deft.ndarray._wrap makes them. */
static PyObject *deft_py_wrap_results(deft_py_op_fn *f, int n, DeftNDArrayHandle *out) {
    PyObject *self = NULL; /* SWIG_NewPointerObj reads `self` (for SWIG's builtin types) */
    PyObject *list = n == 1 ? NULL : PyList_New(n), *one = NULL;
    if (n != 1 && !list) {
        for (int k = 0; k < n; k++) DeftNDArrayFree(out[k]);
        return NULL;
    }
    for (int k = 0; k < n; k++) {
        PyObject *arr = f->array->tp_alloc(f->array, 0);
        PyObject *handle = arr ? SWIG_NewPointerObj(out[k], SWIGTYPE_p_DeftNDArray,
                                                    SWIG_POINTER_OWN) : NULL;
        if (handle) out[k] = NULL; /* owned by the handle object now */
        if (!handle || PyObject_SetAttr(arr, deft_py_this_name, handle) != 0 ||
            PyObject_SetAttr(arr, deft_py_grad_name, Py_None) != 0) {
            Py_XDECREF(handle), Py_XDECREF(arr), Py_XDECREF(list);
            for (int j = k; j < n; j++) DeftNDArrayFree(out[j]);
            return NULL;
        }
        Py_DECREF(handle);
        if (n == 1)
            one = arr;
        else
            PyList_SET_ITEM(list, k, arr);
    }
    return n == 1 ? one : list;
}

static PyObject *deft_py_op_fn_call(PyObject *self, PyObject *args, PyObject *kwargs) {
    deft_py_op_fn *f = (deft_py_op_fn *)self;
    Py_ssize_t nin = PyTuple_GET_SIZE(args), nparams = kwargs ? PyDict_GET_SIZE(kwargs) : 0;
    void *in[16];
    const char *keys[16], *vals[16];
    PyObject *texts[16];
    int ntexts = 0, fast = nin > 0 && nin <= f->most && nin <= 16 && nparams <= 16;
    for (Py_ssize_t i = 0; fast && i < nin; i++) {
        PyObject *x = PyTuple_GET_ITEM(args, i), *inner;
        fast = Py_TYPE(x) == f->array && (inner = PyObject_GetAttr(x, deft_py_this_name));
        if (!fast) break;
        fast = SWIG_IsOK(SWIG_ConvertPtr(inner, &in[i], SWIGTYPE_p_DeftNDArray, 0));
        Py_DECREF(inner); /* x keeps it alive */
    }
    Py_ssize_t pos = 0;
    PyObject *key, *value;
    while (fast && kwargs && PyDict_Next(kwargs, &pos, &key, &value)) {
        fast = PySet_Contains(f->params, key) == 1 &&
               (texts[ntexts] = deft_py_fast_text(value)) != NULL;
        if (fast) {
            keys[ntexts] = PyUnicode_AsUTF8(key);
            vals[ntexts] = PyUnicode_AsUTF8(texts[ntexts]);
            ntexts++;
            fast = keys[ntexts - 1] && vals[ntexts - 1];
        }
    }
    PyObject *result = NULL;
    if (fast) {
        DeftNDArrayHandle out[DEFT_MAX_OUTPUTS] = {NULL};
        int nout = DEFT_MAX_OUTPUTS;
        if (DeftImperativeInvoke(f->op, (int)nin, (const DeftNDArrayHandle *)in, &nout, out,
                                 ntexts, keys, vals) == 0)
            result = deft_py_wrap_results(f, nout, out);
        else
            fast = 0; /* the slow call raises the error, with Python's wording */
    }
    for (int i = 0; i < ntexts; i++) Py_DECREF(texts[i]);
    if (fast) return result; /* or NULL, with the error of making the arrays */
    PyErr_Clear();           /* a failed look-up above only means: not the fast call */
    return PyObject_Call(f->slow, args, kwargs);
}

static int deft_py_op_fn_traverse(PyObject *self, visitproc visit, void *arg) {
    deft_py_op_fn *f = (deft_py_op_fn *)self;
    Py_VISIT(f->dict);
    Py_VISIT(f->params);
    Py_VISIT(f->slow);
    Py_VISIT(f->array);
    return 0;
}

static int deft_py_op_fn_clear(PyObject *self) {
    deft_py_op_fn *f = (deft_py_op_fn *)self;
    Py_CLEAR(f->dict);
    Py_CLEAR(f->params);
    Py_CLEAR(f->slow);
    PyObject *array = (PyObject *)f->array;
    f->array = NULL;
    Py_XDECREF(array);
    return 0;
}

static void deft_py_op_fn_dealloc(PyObject *self) {
    PyObject_GC_UnTrack(self);
    deft_py_op_fn_clear(self);
    Py_TYPE(self)->tp_free(self);
}

/* OpFunction(op handle, parameter names (a set), most inputs, slow, NDArray) */
static PyObject *deft_py_op_fn_new(PyTypeObject *type, PyObject *args, PyObject *kwargs) {
    PyObject *handle, *params, *slow, *array;
    Py_ssize_t most;
    if (kwargs && PyDict_GET_SIZE(kwargs)) {
        PyErr_SetString(PyExc_TypeError, "OpFunction takes positional arguments");
        return NULL;
    }
    if (!PyArg_ParseTuple(args, "OO!nOO!", &handle, &PySet_Type, &params, &most, &slow,
                          &PyType_Type, &array))
        return NULL;
    void *op;
    if (!SWIG_IsOK(SWIG_ConvertPtr(handle, &op, SWIGTYPE_p_DeftOp, 0))) {
        PyErr_SetString(PyExc_TypeError, "OpFunction: the first argument is not an operator handle");
        return NULL;
    }
    deft_py_op_fn *f = (deft_py_op_fn *)type->tp_alloc(type, 0);
    if (!f) return NULL;
    f->op = op;
    f->params = Py_NewRef(params), f->slow = Py_NewRef(slow), f->most = most;
    f->array = (PyTypeObject *)Py_NewRef(array);
    return (PyObject *)f;
}

static PyTypeObject deft_py_op_fn_type = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "deft._deft.OpFunction",
    .tp_basicsize = sizeof(deft_py_op_fn),
    .tp_dictoffset = offsetof(deft_py_op_fn, dict),
    .tp_flags = Py_TPFLAGS_DEFAULT | Py_TPFLAGS_HAVE_GC,
    .tp_doc = "A typed operator function of deft.nd (its call runs in C when it can).",
    .tp_new = deft_py_op_fn_new,
    .tp_call = deft_py_op_fn_call,
    .tp_traverse = deft_py_op_fn_traverse,
    .tp_clear = deft_py_op_fn_clear,
    .tp_dealloc = deft_py_op_fn_dealloc,
    .tp_getattro = PyObject_GenericGetAttr,
    .tp_setattro = PyObject_GenericSetAttr,
};
%}

%init %{
    if (deft_py_init_errors(m) != 0) return NULL;
    if (!(deft_py_this_name = PyUnicode_InternFromString("this")) ||
        !(deft_py_grad_name = PyUnicode_InternFromString("_grad")) ||
        PyType_Ready(&deft_py_op_fn_type) != 0 ||
        PyModule_AddObjectRef(m, "OpFunction", (PyObject *)&deft_py_op_fn_type) != 0)
        return NULL;
%}

/* Errors reach Python as exceptions: these two are read inside each call. */
%ignore DeftGetLastError;
%ignore DeftGetLastErrorKind;

/* ---- status ---- */

%typemap(out) int {
    if ($1 != 0) {
        deft_py_raise();
        SWIG_fail;
    }
    $result = SWIG_Py_Void();
}

/* ---- scalar out-parameters ---- */

%define DEFT_PY_OUT(TYPE, NAME, TO_PYTHON)
%typemap(in, numinputs=0) TYPE *NAME (TYPE temp) { $1 = ($1_ltype)&temp; temp = 0; }
%typemap(argout) TYPE *NAME { $result = SWIG_AppendOutput($result, TO_PYTHON(*$1)); }
%enddef

DEFT_PY_OUT(int, out, PyLong_FromLong)
DEFT_PY_OUT(int, prev, PyLong_FromLong)
DEFT_PY_OUT(int, out_ndim, PyLong_FromLong)
DEFT_PY_OUT(int, out_type, PyLong_FromLong)
DEFT_PY_OUT(int, out_id, PyLong_FromLong)
DEFT_PY_OUT(int, out_min, PyLong_FromLong)
DEFT_PY_OUT(int, out_max, PyLong_FromLong)
DEFT_PY_OUT(int, out_found, PyLong_FromLong)
DEFT_PY_OUT(int, out_complete, PyLong_FromLong)
DEFT_PY_OUT(int, out_dtype, PyLong_FromLong)
DEFT_PY_OUT(int64_t, out, PyLong_FromLongLong)
DEFT_PY_OUT(int64_t, hits, PyLong_FromLongLong)
DEFT_PY_OUT(int64_t, misses, PyLong_FromLongLong)
DEFT_PY_OUT(size_t, out, PyLong_FromSize_t)
DEFT_PY_OUT(size_t, free_bytes, PyLong_FromSize_t)
DEFT_PY_OUT(size_t, total_bytes, PyLong_FromSize_t)
DEFT_PY_OUT(const char *, out, deft_py_str)
DEFT_PY_OUT(const char *, out_name, deft_py_str)
DEFT_PY_OUT(const char *, out_description, deft_py_str)
DEFT_PY_OUT(const char *, out_type, deft_py_str)
DEFT_PY_OUT(const char *, out_default, deft_py_str)
DEFT_PY_OUT(const char *, out_doc, deft_py_str)
DEFT_PY_OUT(const char *, out_value, deft_py_str)
DEFT_PY_OUT(const char *, out_json, deft_py_str)
DEFT_PY_OUT(const char *, out_dot, deft_py_str)

/* ---- new handles ---- */

%define DEFT_PY_OUT_HANDLE(HANDLE, STRUCT, FLAGS)
%typemap(in, numinputs=0) HANDLE *out (HANDLE temp) { temp = NULL; $1 = &temp; }
%typemap(argout) HANDLE *out {
    $result = SWIG_AppendOutput($result, SWIG_NewPointerObj(*$1, $descriptor(struct STRUCT *), FLAGS));
}
%enddef

DEFT_PY_OUT_HANDLE(DeftNDArrayHandle, DeftNDArray, SWIG_POINTER_OWN)
DEFT_PY_OUT_HANDLE(DeftSymbolHandle, DeftSymbol, SWIG_POINTER_OWN)
DEFT_PY_OUT_HANDLE(DeftCachedOpHandle, DeftCachedOp, SWIG_POINTER_OWN)
DEFT_PY_OUT_HANDLE(DeftOpHandle, DeftOp, 0) /* operators are static */
DEFT_PY_OUT_HANDLE(DeftProfileDomainHandle, DeftProfileDomain, SWIG_POINTER_OWN)
DEFT_PY_OUT_HANDLE(DeftProfileObjectHandle, DeftProfileObject, SWIG_POINTER_OWN)

/* ---- handles in ---- */

%define DEFT_PY_HANDLE_IN(HANDLE, STRUCT)
%typemap(in) HANDLE {
    void *handle = NULL;
    if (deft_py_handle($input, $descriptor(struct STRUCT *), "$1_name", -1, &handle)) SWIG_fail;
    $1 = ($1_ltype)handle;
}
%enddef

DEFT_PY_HANDLE_IN(DeftNDArrayHandle, DeftNDArray)
DEFT_PY_HANDLE_IN(DeftSymbolHandle, DeftSymbol)
DEFT_PY_HANDLE_IN(DeftCachedOpHandle, DeftCachedOp)
DEFT_PY_HANDLE_IN(DeftOpHandle, DeftOp)
DEFT_PY_HANDLE_IN(DeftProfileDomainHandle, DeftProfileDomain)
DEFT_PY_HANDLE_IN(DeftProfileObjectHandle, DeftProfileObject)

/* ---- sequences in ---- */

%define DEFT_PY_HANDLES_IN(HANDLE, STRUCT)
%typemap(in) const HANDLE * (void *small[16], void **heap = NULL, void **items = NULL) {
    if (deft_py_handles($input, $descriptor(struct STRUCT *), "$1_name", small, 16, &items, &heap))
        SWIG_fail;
    $1 = ($1_ltype)items;
}
%typemap(freearg) const HANDLE * { free(heap$argnum); }
%enddef

DEFT_PY_HANDLES_IN(DeftNDArrayHandle, DeftNDArray)
DEFT_PY_HANDLES_IN(DeftSymbolHandle, DeftSymbol)

%typemap(in) const char *const * (const char *small[16], const char **heap = NULL, PyObject *seq = NULL) {
    const char **items = NULL;
    if (deft_py_strings($input, small, 16, &seq, &items, &heap)) SWIG_fail;
    $1 = ($1_ltype)items;
}
%typemap(freearg) const char *const * {
    free(heap$argnum);
    Py_XDECREF(seq$argnum);
}

%typemap(in) const int * (int small[16], void *heap = NULL, void *items = NULL) {
    if (deft_py_ints($input, 0, small, 16, &items, &heap)) SWIG_fail;
    $1 = ($1_ltype)items;
}
%typemap(freearg) const int * { free(heap$argnum); }
%typemap(in) const int64_t * (int64_t small[16], void *heap = NULL, void *items = NULL) {
    if (deft_py_ints($input, 1, small, 16, &items, &heap)) SWIG_fail;
    $1 = ($1_ltype)items;
}
%typemap(freearg) const int64_t * { free(heap$argnum); }

/* ---- buffers ---- */

%typemap(in) (const void *data, size_t nbytes) (Py_buffer view, int have = 0) {
    if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS) != 0) SWIG_fail;
    have = 1;
    $1 = ($1_ltype)view.buf;
    $2 = (size_t)view.len;
}
%typemap(freearg) (const void *data, size_t nbytes) { if (have$argnum) PyBuffer_Release(&view$argnum); }
%typemap(in) (void *data, size_t nbytes) (Py_buffer view, int have = 0) {
    if (PyObject_GetBuffer($input, &view, PyBUF_C_CONTIGUOUS | PyBUF_WRITABLE) != 0) SWIG_fail;
    have = 1;
    $1 = ($1_ltype)view.buf;
    $2 = (size_t)view.len;
}
%typemap(freearg) (void *data, size_t nbytes) { if (have$argnum) PyBuffer_Release(&view$argnum); }

/* ---- lists out ---- */

%define DEFT_PY_NAMES_OUT(COUNT, NAMES)
%typemap(in, numinputs=0) (int *COUNT, const char *const **NAMES) (int n, const char *const *names) {
    n = 0, names = NULL;
    $1 = &n;
    $2 = ($2_ltype)&names;
}
%typemap(argout) (int *COUNT, const char *const **NAMES) {
    $result = SWIG_AppendOutput($result, deft_py_str_list(*$1, (const char *const *)*$2));
}
%enddef

DEFT_PY_NAMES_OUT(out_count, out_names)
DEFT_PY_NAMES_OUT(out_num_names, out_names)
DEFT_PY_NAMES_OUT(out_count, out_words)

%typemap(in, numinputs=0) (int64_t *out_shape, int capacity, int *out_ndim) (int64_t dims[DEFT_MAX_NDIM], int ndim) {
    ndim = 0;
    $1 = dims, $2 = DEFT_MAX_NDIM, $3 = &ndim;
}
%typemap(argout) (int64_t *out_shape, int capacity, int *out_ndim) {
    $result = SWIG_AppendOutput($result, deft_py_tuple64($1, *$3));
}

/* An array's layout: (strides, offset, is_view), strides over DEFT_MAX_NDIM
 * dimensions (the caller keeps as many as the array has). */
%typemap(in, numinputs=0) (int64_t *strides, int64_t *offset, int *is_view)
    (int64_t steps[DEFT_MAX_NDIM] = {0}, int64_t first = 0, int view = 0) {
    $1 = steps, $2 = &first, $3 = &view;
}
%typemap(argout) (int64_t *strides, int64_t *offset, int *is_view) {
    $result = SWIG_AppendOutput($result, Py_BuildValue("(NLi)", deft_py_tuple64($1, DEFT_MAX_NDIM),
                                                       (long long)*$2, *$3));
}

/* Inferred shape: (dims, dtype), with None for what is still unknown. */
%typemap(in, numinputs=0) (int64_t *out_dims, int capacity, int *out_ndim, int *out_dtype)
    (int64_t dims[DEFT_MAX_NDIM], int ndim, int dtype) {
    ndim = dtype = -1;
    $1 = dims, $2 = DEFT_MAX_NDIM, $3 = &ndim, $4 = &dtype;
}
%typemap(argout) (int64_t *out_dims, int capacity, int *out_ndim, int *out_dtype) {
    $result = SWIG_AppendOutput($result, *$3 < 0 ? SWIG_Py_Void() : deft_py_tuple64($1, *$3));
    $result = SWIG_AppendOutput($result, *$4 < 0 ? SWIG_Py_Void() : PyLong_FromLong(*$4));
}

/* Invoke: outputs in as a sequence (an array to write, or None for a new
 * one), or None for as many new outputs as the operator makes; out as a list
 * of the produced outputs, None where one was given. */
%typemap(in) (int *num_outputs, DeftNDArrayHandle *outputs)
    (int room, void *small[DEFT_MAX_OUTPUTS], void **heap = NULL, void **given = NULL,
     char gave_small[DEFT_MAX_OUTPUTS], char *gave = NULL, char *gave_heap = NULL) {
    if ($input == Py_None) { /* room for every output an operator may have, all new */
        room = DEFT_MAX_OUTPUTS;
        memset(small, 0, sizeof small);
        given = small;
    } else {
        if (deft_py_handles($input, $descriptor(struct DeftNDArray *), "outputs", small,
                            DEFT_MAX_OUTPUTS, &given, &heap))
            SWIG_fail;
        room = (int)PySequence_Size($input);
    }
    gave = room <= DEFT_MAX_OUTPUTS ? gave_small : (gave_heap = malloc((size_t)room));
    if (!gave) {
        PyErr_NoMemory();
        SWIG_fail;
    }
    if ($input == Py_None)
        memset(gave, 0, (size_t)room);
    else
        for (int k = 0; k < room; k++) gave[k] = given[k] != NULL;
    $1 = &room;
    $2 = ($2_ltype)given;
}
%typemap(argout) (int *num_outputs, DeftNDArrayHandle *outputs) {
    PyObject *list = PyList_New(*$1);
    for (int k = 0; list && k < *$1; k++)
        PyList_SET_ITEM(list, k, gave$argnum[k] ? SWIG_Py_Void()
                                                : SWIG_NewPointerObj($2[k], $descriptor(struct DeftNDArray *), SWIG_POINTER_OWN));
    $result = SWIG_AppendOutput($result, list);
}
%typemap(freearg) (int *num_outputs, DeftNDArrayHandle *outputs) {
    free(heap$argnum);
    free(gave_heap$argnum);
}

/* A loaded NDArray file: [arrays, names or None]; Python owns the arrays,
 * whose entries are cleared before DeftNDArrayListFree frees the lists. */
%typemap(in, numinputs=0) (int *out_count, DeftNDArrayHandle **out_arrays, const char ***out_names)
    (int n, DeftNDArrayHandle *arrays, const char **names) {
    n = 0, arrays = NULL, names = NULL;
    $1 = &n, $2 = &arrays, $3 = &names;
}
%typemap(argout) (int *out_count, DeftNDArrayHandle **out_arrays, const char ***out_names) {
    PyObject *list = PyList_New(*$1);
    for (int k = 0; list && k < *$1; k++) {
        PyObject *h = SWIG_NewPointerObj((*$2)[k], $descriptor(struct DeftNDArray *), SWIG_POINTER_OWN);
        if (!h) Py_CLEAR(list);
        else PyList_SET_ITEM(list, k, h), (*$2)[k] = NULL;
    }
    PyObject *names = list && *$3 ? deft_py_str_list(*$1, *$3) : SWIG_Py_Void();
    DeftNDArrayListFree(*$1, *$2, *$3);
    if (!list || !names) {
        Py_XDECREF(list), Py_XDECREF(names);
        SWIG_fail;
    }
    /* one value, [arrays, names]: appended apart, names would join the arrays' list */
    $result = SWIG_AppendOutput($result, Py_BuildValue("[NN]", list, names));
}
%ignore DeftNDArrayListFree;

/* Gradients out: the Python argument is how many (the number of variables). */
%typemap(in) DeftNDArrayHandle *out_grads (DeftNDArrayHandle *grads = NULL, Py_ssize_t n = 0) {
    n = PyLong_AsSsize_t($input);
    if (n < 0 || n > 1 << 20) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "expected the number of variables");
        SWIG_fail;
    }
    if (!(grads = calloc((size_t)(n ? n : 1), sizeof *grads))) { PyErr_NoMemory(); SWIG_fail; }
    $1 = grads;
}
%typemap(argout) DeftNDArrayHandle *out_grads {
    PyObject *list = PyList_New(n$argnum);
    for (Py_ssize_t k = 0; list && k < n$argnum; k++)
        PyList_SET_ITEM(list, k, $1[k] ? SWIG_NewPointerObj($1[k], $descriptor(struct DeftNDArray *), SWIG_POINTER_OWN)
                                       : SWIG_Py_Void());
    $result = SWIG_AppendOutput($result, list);
}
%typemap(freearg) DeftNDArrayHandle *out_grads { free(grads$argnum); }

/* Deferred status per array: the Python argument is how many (the number of arrays). */
%typemap(in) int *status (int *flags = NULL, Py_ssize_t n = 0) {
    n = PyLong_AsSsize_t($input);
    if (n < 0 || n > 1 << 20) {
        if (!PyErr_Occurred()) PyErr_SetString(PyExc_ValueError, "expected the number of arrays");
        SWIG_fail;
    }
    if (!(flags = calloc((size_t)(n ? n : 1), sizeof *flags))) { PyErr_NoMemory(); SWIG_fail; }
    $1 = flags;
}
%typemap(argout) int *status {
    PyObject *list = PyList_New(n$argnum);
    for (Py_ssize_t k = 0; list && k < n$argnum; k++) PyList_SET_ITEM(list, k, PyBool_FromLong($1[k]));
    $result = SWIG_AppendOutput($result, list);
}
%typemap(freearg) int *status { free(flags$argnum); }

/* ---- DLPack ---- */

%typemap(in, numinputs=0) DLManagedTensor **out (DLManagedTensor *temp) { temp = NULL; $1 = &temp; }
%typemap(argout) DLManagedTensor **out {
    PyObject *capsule = PyCapsule_New(*$1, "dltensor", deft_py_capsule_free);
    if (!capsule) (*$1)->deleter(*$1);
    $result = SWIG_AppendOutput($result, capsule);
}
/* The array takes the tensor over: the capsule is marked used, as DLPack asks. */
%typemap(in) DLManagedTensor *tensor {
    if (!($1 = PyCapsule_GetPointer($input, "dltensor"))) SWIG_fail;
}
%typemap(argout) DLManagedTensor *tensor {
    PyCapsule_SetName($input, "used_dltensor");
}

/* ---- calls that wait release the GIL ---- */

/*
 * Any call that pushes work may wait for room in the engine's queue
 * (back-pressure), and a call may wait for an array inside: the engine calls
 * these two around every such wait, so the GIL is given up exactly while the
 * thread sleeps, and a call that does not wait pays nothing. (Releasing the
 * GIL around every call instead would hand it to any busy Python thread at
 * each operator call, and getting it back can take a switch interval, 5 ms.)
 * The calls below, which usually wait, release it for their whole length.
 */
%{
static void *deft_py_release_gil(void) {
    return PyGILState_Check() ? (void *)PyEval_SaveThread() : NULL;
}

static void deft_py_reacquire_gil(void *state) {
    if (state) PyEval_RestoreThread((PyThreadState *)state);
}

/* After finalisation there is no GIL to give up: a wait then just sleeps. */
static void deft_py_forget_gil(void) {
    DeftSetBlockingHooks(NULL, NULL);
}
%}
%init %{
    if (DeftSetBlockingHooks(deft_py_release_gil, deft_py_reacquire_gil) != 0 ||
        Py_AtExit(deft_py_forget_gil) != 0) {
        PyErr_SetString(PyExc_ImportError, "deft: cannot install the engine's GIL hooks");
        return NULL;
    }
%}

%define DEFT_PY_ALLOW_THREADS(FN)
%exception FN {
    Py_BEGIN_ALLOW_THREADS
    $action
    Py_END_ALLOW_THREADS
}
%enddef

DEFT_PY_ALLOW_THREADS(DeftNDArrayWaitToRead)
DEFT_PY_ALLOW_THREADS(DeftNDArrayWaitToWrite)
DEFT_PY_ALLOW_THREADS(DeftWaitAll)
DEFT_PY_ALLOW_THREADS(DeftShutdown)
DEFT_PY_ALLOW_THREADS(DeftNDArrayCopyToHost)
DEFT_PY_ALLOW_THREADS(DeftNDArrayCopyFromHost)
DEFT_PY_ALLOW_THREADS(DeftNDArraySave)
DEFT_PY_ALLOW_THREADS(DeftNDArrayToDLPack)
DEFT_PY_ALLOW_THREADS(DeftNDArrayTriggerDeferredCompute)
DEFT_PY_ALLOW_THREADS(DeftAutogradBackward)
DEFT_PY_ALLOW_THREADS(DeftAutogradComputeGradient)
DEFT_PY_ALLOW_THREADS(DeftProfilerDump)

/* ---- custom operators: Python handlers behind the C callbacks ---- */

%{
/* The handler's error, as the operator's message; the Python error is cleared. */
static int deft_py_callback_failed(void) {
    PyObject *type, *value, *trace;
    PyErr_Fetch(&type, &value, &trace);
    PyObject *text = value ? PyObject_Str(value) : NULL;
    const char *name = type ? ((PyTypeObject *)type)->tp_name : "error";
    char message[1024];
    snprintf(message, sizeof message, "%s: %s", name, text ? PyUnicode_AsUTF8(text) : "");
    Py_XDECREF(text), Py_XDECREF(type), Py_XDECREF(value), Py_XDECREF(trace);
    PyErr_Clear();
    DeftCustomOpSetError(message);
    return 1;
}

static PyObject *deft_py_borrowed(DeftNDArrayHandle h) {
    static swig_type_info *type;
    if (!type) type = SWIG_TypeQuery("struct DeftNDArray *");
    return SWIG_Python_NewPointerObj(NULL, h, type, 0); /* not owned: deft frees it after */
}

static PyObject *deft_py_borrowed_list(int n, const DeftNDArrayHandle *h) {
    PyObject *list = PyList_New(n);
    for (int i = 0; list && i < n; i++) PyList_SET_ITEM(list, i, deft_py_borrowed(h[i]));
    return list;
}

static int deft_py_infer(void *user, int nin, const int *ndims, const int64_t *shapes,
                         const int *dtypes, int *out_ndim, int64_t *out_shape, int *out_dtype) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *in_shapes = PyList_New(nin), *in_dtypes = PyList_New(nin);
    for (int i = 0; in_shapes && in_dtypes && i < nin; i++) {
        PyList_SET_ITEM(in_shapes, i, deft_py_tuple64(&shapes[i * DEFT_MAX_NDIM], ndims[i]));
        PyList_SET_ITEM(in_dtypes, i, PyLong_FromLong(dtypes[i]));
    }
    PyObject *r = PyObject_CallMethod((PyObject *)user, "infer", "OO", in_shapes, in_dtypes);
    Py_XDECREF(in_shapes), Py_XDECREF(in_dtypes);
    int status = 0;
    PyObject *shape = NULL;
    long dtype = 0;
    if (!r || !PyArg_ParseTuple(r, "Ol", &shape, &dtype)) {
        status = deft_py_callback_failed();
    } else {
        PyObject *seq = PySequence_Fast(shape, "the shape must be a sequence");
        Py_ssize_t n = seq ? PySequence_Fast_GET_SIZE(seq) : -1;
        if (!seq || n > DEFT_MAX_NDIM) {
            if (seq) PyErr_SetString(PyExc_ValueError, "the output shape has too many dimensions");
            status = deft_py_callback_failed();
        } else {
            for (Py_ssize_t d = 0; d < n; d++)
                out_shape[d] = PyLong_AsLongLong(PySequence_Fast_GET_ITEM(seq, d));
            *out_ndim = (int)n, *out_dtype = (int)dtype;
            if (PyErr_Occurred()) status = deft_py_callback_failed();
        }
        Py_XDECREF(seq);
    }
    Py_XDECREF(r);
    PyGILState_Release(gil);
    return status;
}

static int deft_py_forward(void *user, int nin, const DeftNDArrayHandle *in,
                           DeftNDArrayHandle out, int is_train) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *inputs = deft_py_borrowed_list(nin, in), *output = deft_py_borrowed(out);
    PyObject *r = inputs && output ? PyObject_CallMethod((PyObject *)user, "forward", "OOi",
                                                         inputs, output, is_train)
                                   : NULL;
    int status = r ? 0 : deft_py_callback_failed();
    Py_XDECREF(r), Py_XDECREF(inputs), Py_XDECREF(output);
    PyGILState_Release(gil);
    return status;
}

static int deft_py_backward(void *user, DeftNDArrayHandle out_grad, int nin,
                            const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                            const DeftNDArrayHandle *in_grads) {
    PyGILState_STATE gil = PyGILState_Ensure();
    PyObject *dy = deft_py_borrowed(out_grad), *inputs = deft_py_borrowed_list(nin, in);
    PyObject *y = deft_py_borrowed(out), *grads = deft_py_borrowed_list(nin, in_grads);
    PyObject *r = dy && inputs && y && grads
                      ? PyObject_CallMethod((PyObject *)user, "backward", "OOOO", dy, inputs, y,
                                            grads)
                      : NULL;
    int status = r ? 0 : deft_py_callback_failed();
    Py_XDECREF(r), Py_XDECREF(dy), Py_XDECREF(inputs), Py_XDECREF(y), Py_XDECREF(grads);
    PyGILState_Release(gil);
    return status;
}
%}

%inline %{
/* Register a custom operator whose callbacks are the methods infer, forward
 * and (when has_backward) backward of `handler`, which is kept for good. */
static void deft_py_release(void *user) {
    Py_DECREF((PyObject *)user); /* a failed registration: called with the GIL held */
}

int DeftPyCustomOpRegister(const char *name, int num_inputs, PyObject *handler,
                           int has_backward) {
    Py_INCREF(handler);
    DeftCustomOpCallbacks cb = {num_inputs, deft_py_infer, deft_py_forward,
                                has_backward ? deft_py_backward : NULL, handler, deft_py_release};
    return DeftCustomOpRegister(name, &cb);
}
%}
