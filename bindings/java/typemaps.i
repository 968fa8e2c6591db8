/*
 * How deft's C API looks from Java through JNI (included by interface.i).
 * These classes are internal (org.deft.internal); org.deft is the API.
 *
 * - A status of -1 throws org.deft.DeftException with the error kind and
 *   DeftGetLastError()'s text, read inside the same native call.
 * - Out-parameters are one-element arrays the caller passes: int[], long[],
 *   String[], and DeftNDArray[] / DeftSymbol[] / DeftCachedOp[] / DeftOp[]
 *   for new handles (owned by the object put there).
 * - C arrays are Java arrays (null for NULL); buffers are direct ByteBuffers.
 * - The handle classes free their handle through a java.lang.ref.Cleaner:
 *   delete() (called by close()) runs it at once, and the Cleaner runs it if
 *   the object becomes unreachable first. SWIG's finalize() is not emitted.
 */

%{
#include <stdint.h>
#include <stdlib.h>

/* Throws org.deft.DeftException for the last deft error (jni_calls.c). */
void deft_java_throw(JNIEnv *env);

/* A Java object of an internal handle class owning `ptr` (NULL: null). */
static jobject deft_java_owned(JNIEnv *env, const char *cls_name, void *ptr) {
    if (!ptr) return NULL;
    jclass cls = (*env)->FindClass(env, cls_name);
    jmethodID ctor = cls ? (*env)->GetMethodID(env, cls, "<init>", "(JZ)V") : NULL;
    return ctor ? (*env)->NewObject(env, cls, ctor, (jlong)(intptr_t)ptr, JNI_TRUE) : NULL;
}

/* Handle fields of Java objects, for arrays of handles (null elements: NULL). */
static int deft_java_handles(JNIEnv *env, jobjectArray arr, void ***out) {
    *out = NULL;
    if (!arr) return 0;
    jsize n = (*env)->GetArrayLength(env, arr);
    void **items = calloc((size_t)n + 1, sizeof *items);
    if (!items) return -1;
    for (jsize i = 0; i < n; i++) {
        jobject obj = (*env)->GetObjectArrayElement(env, arr, i);
        if (!obj) continue;
        jclass cls = (*env)->GetObjectClass(env, obj);
        jmethodID get = (*env)->GetMethodID(env, cls, "swigPointer", "()J");
        if (!get) {
            free(items);
            return -1;
        }
        items[i] = (void *)(intptr_t)(*env)->CallLongMethod(env, obj, get);
        (*env)->DeleteLocalRef(env, cls); /* long arrays must not exhaust local references */
        (*env)->DeleteLocalRef(env, obj);
    }
    *out = items;
    return 0;
}
%}

%ignore DeftGetLastError;
%ignore DeftGetLastErrorKind;

/* ---- status ---- */

%typemap(out) int {
    if ($1 != 0) {
        deft_java_throw(jenv);
        return $null;
    }
    $result = (jint)$1;
}

/* ---- handle classes: a Cleaner instead of finalize() ---- */

%typemap(javafinalize) SWIGTYPE ""

%define DEFT_JAVA_HANDLE_CLASS(STRUCT)
%typemap(javabody) struct STRUCT %{
  private static final java.lang.ref.Cleaner CLEANER = java.lang.ref.Cleaner.create();

  /** Frees the handle once, from delete() or from the Cleaner's thread. */
  private static final class Release implements Runnable {
    private long ptr;
    Release(long ptr) { this.ptr = ptr; }
    @Override public synchronized void run() {
      if (ptr != 0) { $imclassname.delete_$javaclassname(ptr); ptr = 0; }
    }
  }

  private transient long swigCPtr;
  private final transient Release release;
  private final transient java.lang.ref.Cleaner.Cleanable cleanable;
  private final transient Object owner;

  public $javaclassname(long cPtr, boolean cMemoryOwn) {
    swigCPtr = cPtr;
    release = cMemoryOwn && cPtr != 0 ? new Release(cPtr) : null;
    cleanable = release != null ? CLEANER.register(this, release) : null;
    owner = null;
  }

  /**
   * A borrowed view of a handle that owner frees: the view keeps owner
   * reachable, and a native call keeps its arguments reachable, so owner
   * cannot be cleaned while a call that was given the view runs.
   */
  public $javaclassname(long cPtr, Object owner) {
    swigCPtr = cPtr;
    release = null;
    cleanable = null;
    this.owner = owner;
  }

  /** Whether this object frees its handle (false: a borrowed or released one). */
  public synchronized boolean swigOwns() {
    return release != null && swigCPtr != 0;
  }

  /**
   * Give up the handle without freeing it: the caller owns it now (the API
   * classes take handles over this way). Returns 0 after delete().
   */
  public synchronized long swigRelease() {
    long ptr = swigCPtr;
    swigCPtr = 0;
    if (release != null) {
      synchronized (release) { release.ptr = 0; }
      cleanable.clean();
    }
    return ptr;
  }

  public static long getCPtr($javaclassname obj) {
    return (obj == null) ? 0 : obj.swigCPtr;
  }

  /** The handle, or 0 after delete(): C then reports a NULL handle. */
  public synchronized long swigPointer() { return swigCPtr; }
%}
%typemap(javadestruct, methodname="delete", methodmodifiers="public synchronized") struct STRUCT {
    swigCPtr = 0;
    if (cleanable != null) cleanable.clean();
  }
%enddef

DEFT_JAVA_HANDLE_CLASS(DeftNDArray)
DEFT_JAVA_HANDLE_CLASS(DeftSymbol)
DEFT_JAVA_HANDLE_CLASS(DeftCachedOp)
DEFT_JAVA_HANDLE_CLASS(DeftProfileDomain)
DEFT_JAVA_HANDLE_CLASS(DeftProfileObject)

/* Operators are static registry entries: nothing to free. */
%typemap(javabody) struct DeftOp %{
  private transient long swigCPtr;

  public $javaclassname(long cPtr, boolean cMemoryOwn) {
    swigCPtr = cPtr;
  }

  public static long getCPtr($javaclassname obj) {
    return (obj == null) ? 0 : obj.swigCPtr;
  }

  public long swigPointer() { return swigCPtr; }
%}
%typemap(javadestruct, methodname="delete", methodmodifiers="public") struct DeftOp {
  }

/* ---- 64-bit scalars: Java's long ----
 * With SWIGWORDSIZE64, stdint.i makes int64_t a C long, which SWIG's Java
 * module passes as a 32-bit int: a view's offset or a counter's value beyond
 * 2^31 would be cut short. By value they travel as jlong. */
%apply long long { int64_t };

/* ---- scalar out-parameters: one-element arrays ---- */

%include <typemaps.i>
%apply int *OUTPUT { int *out, int *prev, int *out_ndim, int *out_type, int *out_id,
                     int *out_min, int *out_max, int *out_found, int *out_complete,
                     int *out_dtype, int *num_outputs_out };
%apply long long *OUTPUT { int64_t *out, int64_t *hits, int64_t *misses };

%define DEFT_JAVA_OUT_STRING(NAME)
%typemap(jni) const char **NAME "jobjectArray"
%typemap(jtype) const char **NAME "String[]"
%typemap(jstype) const char **NAME "String[]"
%typemap(javain) const char **NAME "$javainput"
%typemap(in) const char **NAME (const char *temp = NULL) { $1 = ($1_ltype)&temp; }
%typemap(argout) const char **NAME {
    if ($input && temp$argnum)
        (*jenv)->SetObjectArrayElement(jenv, $input, 0, (*jenv)->NewStringUTF(jenv, temp$argnum));
}
%enddef
DEFT_JAVA_OUT_STRING(out)
DEFT_JAVA_OUT_STRING(out_name)
DEFT_JAVA_OUT_STRING(out_description)
DEFT_JAVA_OUT_STRING(out_type)
DEFT_JAVA_OUT_STRING(out_default)
DEFT_JAVA_OUT_STRING(out_doc)
DEFT_JAVA_OUT_STRING(out_value)
DEFT_JAVA_OUT_STRING(out_json)
DEFT_JAVA_OUT_STRING(out_dot)

%define DEFT_JAVA_OUT_SIZE(NAME)
%typemap(jni) size_t *NAME "jlongArray"
%typemap(jtype) size_t *NAME "long[]"
%typemap(jstype) size_t *NAME "long[]"
%typemap(javain) size_t *NAME "$javainput"
%typemap(in) size_t *NAME (size_t temp = 0) { $1 = &temp; }
%typemap(argout) size_t *NAME {
    jlong v = (jlong)temp$argnum;
    if ($input) (*jenv)->SetLongArrayRegion(jenv, $input, 0, 1, &v);
}
%enddef
DEFT_JAVA_OUT_SIZE(out)
DEFT_JAVA_OUT_SIZE(free_bytes)
DEFT_JAVA_OUT_SIZE(total_bytes)

/* ---- new handles: an array of one element receives an owning object ---- */

%define DEFT_JAVA_OUT_HANDLE(HANDLE, STRUCT, OWNED)
%typemap(jni) HANDLE *out "jobjectArray"
%typemap(jtype) HANDLE *out "STRUCT[]"
%typemap(jstype) HANDLE *out "STRUCT[]"
%typemap(javain) HANDLE *out "$javainput"
%typemap(in) HANDLE *out (HANDLE temp = NULL) { $1 = &temp; }
%typemap(argout) HANDLE *out {
    if ($input && temp$argnum) {
        jclass cls = (*jenv)->FindClass(jenv, "org/deft/internal/STRUCT");
        jmethodID ctor = cls ? (*jenv)->GetMethodID(jenv, cls, "<init>", "(JZ)V") : NULL;
        jobject obj = ctor ? (*jenv)->NewObject(jenv, cls, ctor, (jlong)(intptr_t)temp$argnum,
                                                (jboolean)OWNED) : NULL;
        (*jenv)->SetObjectArrayElement(jenv, $input, 0, obj);
    }
}
%enddef
DEFT_JAVA_OUT_HANDLE(DeftNDArrayHandle, DeftNDArray, JNI_TRUE)
DEFT_JAVA_OUT_HANDLE(DeftSymbolHandle, DeftSymbol, JNI_TRUE)
DEFT_JAVA_OUT_HANDLE(DeftCachedOpHandle, DeftCachedOp, JNI_TRUE)
DEFT_JAVA_OUT_HANDLE(DeftOpHandle, DeftOp, JNI_FALSE)
DEFT_JAVA_OUT_HANDLE(DeftProfileDomainHandle, DeftProfileDomain, JNI_TRUE)
DEFT_JAVA_OUT_HANDLE(DeftProfileObjectHandle, DeftProfileObject, JNI_TRUE)

/* Invoke: (int[] count, DeftNDArray[] outputs): null entries receive new arrays. */
%typemap(jni) (int *num_outputs, DeftNDArrayHandle *outputs) "jobjectArray"
%typemap(jtype) (int *num_outputs, DeftNDArrayHandle *outputs) "DeftNDArray[]"
%typemap(jstype) (int *num_outputs, DeftNDArrayHandle *outputs) "DeftNDArray[]"
%typemap(javain) (int *num_outputs, DeftNDArrayHandle *outputs) "$javainput"
%typemap(in) (int *num_outputs, DeftNDArrayHandle *outputs) (int room = 0, void **given = NULL) {
    if (deft_java_handles(jenv, $input, &given)) return $null;
    room = $input ? (int)(*jenv)->GetArrayLength(jenv, $input) : 0;
    $1 = &room;
    $2 = (DeftNDArrayHandle *)given;
}
%typemap(argout) (int *num_outputs, DeftNDArrayHandle *outputs) {
    for (int k = 0; k < room$argnum; k++) {
        jobject old = (*jenv)->GetObjectArrayElement(jenv, $input, k);
        if (old || k >= *$1) continue; /* given: written in place */
        (*jenv)->SetObjectArrayElement(jenv, $input, k,
            deft_java_owned(jenv, "org/deft/internal/DeftNDArray", $2[k]));
    }
}
%typemap(freearg) (int *num_outputs, DeftNDArrayHandle *outputs) { free(given$argnum); }

/* Gradients out (ComputeGradient): an array with room for one per variable. */
%typemap(jni) DeftNDArrayHandle *out_grads "jobjectArray"
%typemap(jtype) DeftNDArrayHandle *out_grads "DeftNDArray[]"
%typemap(jstype) DeftNDArrayHandle *out_grads "DeftNDArray[]"
%typemap(javain) DeftNDArrayHandle *out_grads "$javainput"
%typemap(in) DeftNDArrayHandle *out_grads (jsize n = 0) {
    n = $input ? (*jenv)->GetArrayLength(jenv, $input) : 0;
    $1 = calloc((size_t)n + 1, sizeof *$1);
}
%typemap(argout) DeftNDArrayHandle *out_grads {
    for (jsize k = 0; k < n$argnum; k++)
        (*jenv)->SetObjectArrayElement(jenv, $input, k,
            deft_java_owned(jenv, "org/deft/internal/DeftNDArray", $1[k]));
}
%typemap(freearg) DeftNDArrayHandle *out_grads { free($1); }

/* Deferred status per array: an int[] with room for one per array. */
%typemap(jni) int *status "jintArray"
%typemap(jtype) int *status "int[]"
%typemap(jstype) int *status "int[]"
%typemap(javain) int *status "$javainput"
%typemap(in) int *status { $1 = $input ? (int *)(*jenv)->GetIntArrayElements(jenv, $input, NULL) : NULL; }
%typemap(argout) int *status { if ($input) (*jenv)->ReleaseIntArrayElements(jenv, $input, (jint *)$1, 0); }

/* ---- sequences in ---- */

%define DEFT_JAVA_HANDLES_IN(HANDLE, STRUCT)
%typemap(jni) const HANDLE * "jobjectArray"
%typemap(jtype) const HANDLE * "STRUCT[]"
%typemap(jstype) const HANDLE * "STRUCT[]"
%typemap(javain) const HANDLE * "$javainput"
%typemap(in) const HANDLE * (void **items = NULL) {
    if (deft_java_handles(jenv, $input, &items)) return $null;
    $1 = ($1_ltype)items;
}
%typemap(freearg) const HANDLE * { free(items$argnum); }
%enddef
DEFT_JAVA_HANDLES_IN(DeftNDArrayHandle, DeftNDArray)
DEFT_JAVA_HANDLES_IN(DeftSymbolHandle, DeftSymbol)

%typemap(jni) const char *const * "jobjectArray"
%typemap(jtype) const char *const * "String[]"
%typemap(jstype) const char *const * "String[]"
%typemap(javain) const char *const * "$javainput"
%typemap(in) const char *const * (jsize n = 0, const char **texts = NULL) {
    n = $input ? (*jenv)->GetArrayLength(jenv, $input) : 0;
    texts = $input ? calloc((size_t)n + 1, sizeof *texts) : NULL;
    for (jsize i = 0; texts && i < n; i++) {
        jstring s = (jstring)(*jenv)->GetObjectArrayElement(jenv, $input, i);
        texts[i] = s ? (*jenv)->GetStringUTFChars(jenv, s, NULL) : NULL;
    }
    $1 = ($1_ltype)texts;
}
%typemap(freearg) const char *const * {
    for (jsize i = 0; texts$argnum && i < n$argnum; i++) {
        jstring s = (jstring)(*jenv)->GetObjectArrayElement(jenv, $input, i);
        if (s && texts$argnum[i]) (*jenv)->ReleaseStringUTFChars(jenv, s, texts$argnum[i]);
    }
    free(texts$argnum);
}

%typemap(jni) const int64_t * "jlongArray"
%typemap(jtype) const int64_t * "long[]"
%typemap(jstype) const int64_t * "long[]"
%typemap(javain) const int64_t * "$javainput"
%typemap(in) const int64_t * { $1 = $input ? ($1_ltype)(*jenv)->GetLongArrayElements(jenv, $input, NULL) : NULL; }
%typemap(freearg) const int64_t * { if ($input) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong *)$1, JNI_ABORT); }
%typemap(jni) const int * "jintArray"
%typemap(jtype) const int * "int[]"
%typemap(jstype) const int * "int[]"
%typemap(javain) const int * "$javainput"
%typemap(in) const int * { $1 = $input ? ($1_ltype)(*jenv)->GetIntArrayElements(jenv, $input, NULL) : NULL; }
%typemap(freearg) const int * { if ($input) (*jenv)->ReleaseIntArrayElements(jenv, $input, (jint *)$1, JNI_ABORT); }

/* ---- buffers: direct ByteBuffers ---- */

%define DEFT_JAVA_BUFFER(QUAL)
%typemap(jni) (QUAL void *data, size_t nbytes) "jobject"
%typemap(jtype) (QUAL void *data, size_t nbytes) "java.nio.ByteBuffer"
%typemap(jstype) (QUAL void *data, size_t nbytes) "java.nio.ByteBuffer"
%typemap(javain) (QUAL void *data, size_t nbytes) "$javainput"
%typemap(in) (QUAL void *data, size_t nbytes) {
    $1 = $input ? (*jenv)->GetDirectBufferAddress(jenv, $input) : NULL;
    $2 = $input ? (size_t)(*jenv)->GetDirectBufferCapacity(jenv, $input) : 0;
}
%enddef
DEFT_JAVA_BUFFER(const)
DEFT_JAVA_BUFFER()

/* ---- lists out: String[][] holder ---- */

%define DEFT_JAVA_NAMES_OUT(COUNT, NAMES)
%typemap(jni) (int *COUNT, const char *const **NAMES) "jobjectArray"
%typemap(jtype) (int *COUNT, const char *const **NAMES) "String[][]"
%typemap(jstype) (int *COUNT, const char *const **NAMES) "String[][]"
%typemap(javain) (int *COUNT, const char *const **NAMES) "$javainput"
%typemap(in) (int *COUNT, const char *const **NAMES) (int n = 0, const char *const *names = NULL) {
    $1 = &n;
    $2 = ($2_ltype)&names;
}
%typemap(argout) (int *COUNT, const char *const **NAMES) {
    jclass string_cls = (*jenv)->FindClass(jenv, "java/lang/String");
    jobjectArray list = string_cls ? (*jenv)->NewObjectArray(jenv, n$argnum, string_cls, NULL) : NULL;
    for (int i = 0; list && i < n$argnum; i++)
        (*jenv)->SetObjectArrayElement(jenv, list, i, (*jenv)->NewStringUTF(jenv, names$argnum[i]));
    if ($input) (*jenv)->SetObjectArrayElement(jenv, $input, 0, list);
}
%enddef
DEFT_JAVA_NAMES_OUT(out_count, out_names)
DEFT_JAVA_NAMES_OUT(out_num_names, out_names)
DEFT_JAVA_NAMES_OUT(out_count, out_words)

/* Shapes out: long[] of room DEFT_MAX_NDIM, then int[] ndim. */
%typemap(jni) (int64_t *out_shape, int capacity) "jlongArray"
%typemap(jtype) (int64_t *out_shape, int capacity) "long[]"
%typemap(jstype) (int64_t *out_shape, int capacity) "long[]"
%typemap(javain) (int64_t *out_shape, int capacity) "$javainput"
%typemap(in) (int64_t *out_shape, int capacity) {
    $1 = $input ? ($1_ltype)(*jenv)->GetLongArrayElements(jenv, $input, NULL) : NULL;
    $2 = $input ? (int)(*jenv)->GetArrayLength(jenv, $input) : 0;
}
%typemap(argout) (int64_t *out_shape, int capacity) { if ($input) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong *)$1, 0); }
%typemap(jni) (int64_t *out_dims, int capacity) "jlongArray"
%typemap(jtype) (int64_t *out_dims, int capacity) "long[]"
%typemap(jstype) (int64_t *out_dims, int capacity) "long[]"
%typemap(javain) (int64_t *out_dims, int capacity) "$javainput"
%typemap(in) (int64_t *out_dims, int capacity) {
    $1 = $input ? ($1_ltype)(*jenv)->GetLongArrayElements(jenv, $input, NULL) : NULL;
    $2 = $input ? (int)(*jenv)->GetArrayLength(jenv, $input) : 0;
}
%typemap(argout) (int64_t *out_dims, int capacity) { if ($input) (*jenv)->ReleaseLongArrayElements(jenv, $input, (jlong *)$1, 0); }

/* DLPack: JNI functions of its own (org.deft.DLPack). */
%include "bindings/java/dlpack.i"

/* ---- custom operators: Java handlers behind the C callbacks ---- */

%{
static JavaVM *deft_java_vm;
static jclass deft_java_bridge; /* org.deft.CustomOps, a global reference */
static jmethodID deft_java_infer, deft_java_forward, deft_java_backward;

/* The callback thread's JNIEnv; it is attached once, as a daemon. */
static JNIEnv *deft_java_env(void) {
    JNIEnv *env = NULL;
    if ((*deft_java_vm)->GetEnv(deft_java_vm, (void **)&env, JNI_VERSION_1_8) == JNI_OK) return env;
    if ((*deft_java_vm)->AttachCurrentThreadAsDaemon(deft_java_vm, (void **)&env, NULL) != JNI_OK)
        return NULL;
    return env;
}

/* A pending Java exception becomes the operator's error (and is cleared). */
static int deft_java_failed(JNIEnv *env) {
    jthrowable e = (*env)->ExceptionOccurred(env);
    if (!e) return 0;
    (*env)->ExceptionClear(env);
    jclass cls = (*env)->GetObjectClass(env, e);
    jmethodID to_string = (*env)->GetMethodID(env, cls, "toString", "()Ljava/lang/String;");
    jstring text = to_string ? (jstring)(*env)->CallObjectMethod(env, e, to_string) : NULL;
    const char *c = text ? (*env)->GetStringUTFChars(env, text, NULL) : NULL;
    DeftCustomOpSetError(c ? c : "a Java exception");
    if (c) (*env)->ReleaseStringUTFChars(env, text, c);
    (*env)->ExceptionClear(env);
    return 1;
}

static jlongArray deft_java_pointers(JNIEnv *env, int n, const DeftNDArrayHandle *h) {
    jlongArray a = (*env)->NewLongArray(env, n);
    for (int i = 0; a && i < n; i++) {
        jlong v = (jlong)(intptr_t)h[i];
        (*env)->SetLongArrayRegion(env, a, i, 1, &v);
    }
    return a;
}

static int deft_java_infer_cb(void *user, int nin, const int *ndims, const int64_t *shapes,
                              const int *dtypes, int *out_ndim, int64_t *out_shape,
                              int *out_dtype) {
    JNIEnv *env = deft_java_env();
    if (!env) return DeftCustomOpSetError("cannot attach the callback thread to the JVM"), 1;
    (*env)->PushLocalFrame(env, 16 + nin);
    jclass long_array = (*env)->FindClass(env, "[J");
    jobjectArray in_shapes = (*env)->NewObjectArray(env, nin, long_array, NULL);
    for (int i = 0; in_shapes && i < nin; i++) {
        jlongArray s = (*env)->NewLongArray(env, ndims[i]);
        (*env)->SetLongArrayRegion(env, s, 0, ndims[i], (const jlong *)&shapes[i * DEFT_MAX_NDIM]);
        (*env)->SetObjectArrayElement(env, in_shapes, i, s);
    }
    jintArray in_dtypes = (*env)->NewIntArray(env, nin);
    (*env)->SetIntArrayRegion(env, in_dtypes, 0, nin, (const jint *)dtypes);
    jlongArray r = (jlongArray)(*env)->CallStaticObjectMethod(env, deft_java_bridge, deft_java_infer,
                                                              (jobject)user, in_shapes, in_dtypes);
    int status = deft_java_failed(env);
    if (!status && r) {
        jsize n = (*env)->GetArrayLength(env, r);
        jlong *v = (*env)->GetLongArrayElements(env, r, NULL);
        if (n < 1 || n - 1 > DEFT_MAX_NDIM) {
            status = 1;
            DeftCustomOpSetError("inferShape returned a bad shape");
        } else {
            *out_dtype = (int)v[0], *out_ndim = (int)(n - 1);
            for (jsize d = 1; d < n; d++) out_shape[d - 1] = v[d];
        }
        (*env)->ReleaseLongArrayElements(env, r, v, JNI_ABORT);
    }
    (*env)->PopLocalFrame(env, NULL);
    return status;
}

static int deft_java_forward_cb(void *user, int nin, const DeftNDArrayHandle *in,
                                DeftNDArrayHandle out, int is_train) {
    JNIEnv *env = deft_java_env();
    if (!env) return DeftCustomOpSetError("cannot attach the callback thread to the JVM"), 1;
    (*env)->PushLocalFrame(env, 16);
    (*env)->CallStaticVoidMethod(env, deft_java_bridge, deft_java_forward, (jobject)user,
                                 deft_java_pointers(env, nin, in), (jlong)(intptr_t)out,
                                 (jboolean)(is_train != 0));
    int status = deft_java_failed(env);
    (*env)->PopLocalFrame(env, NULL);
    return status;
}

static int deft_java_backward_cb(void *user, DeftNDArrayHandle out_grad, int nin,
                                 const DeftNDArrayHandle *in, DeftNDArrayHandle out,
                                 const DeftNDArrayHandle *in_grads) {
    JNIEnv *env = deft_java_env();
    if (!env) return DeftCustomOpSetError("cannot attach the callback thread to the JVM"), 1;
    (*env)->PushLocalFrame(env, 16);
    (*env)->CallStaticVoidMethod(env, deft_java_bridge, deft_java_backward, (jobject)user,
                                 (jlong)(intptr_t)out_grad, deft_java_pointers(env, nin, in),
                                 (jlong)(intptr_t)out, deft_java_pointers(env, nin, in_grads));
    int status = deft_java_failed(env);
    (*env)->PopLocalFrame(env, NULL);
    return status;
}
%}

%typemap(in, numinputs=0) JNIEnv *env "$1 = jenv;"
%typemap(jni) jobject handler "jobject"
%typemap(jtype) jobject handler "Object"
%typemap(jstype) jobject handler "Object"
%typemap(javain) jobject handler "$javainput"
%typemap(in) jobject handler "$1 = $input;"

%inline %{
/* Register a custom operator whose callbacks are those of `handler` (an
 * org.deft.CustomOp), called through org.deft.CustomOps; kept for good. */
int DeftJavaCustomOpRegister(JNIEnv *env, const char *name, int num_inputs, jobject handler,
                             int has_backward) {
    if (!deft_java_bridge) {
        jclass bridge = (*env)->FindClass(env, "org/deft/CustomOps");
        if (!bridge) return DeftCustomOpSetError("org.deft.CustomOps is missing"), -1;
        deft_java_bridge = (jclass)(*env)->NewGlobalRef(env, bridge);
        deft_java_infer = (*env)->GetStaticMethodID(env, bridge, "infer",
                                                    "(Ljava/lang/Object;[[J[I)[J");
        deft_java_forward = (*env)->GetStaticMethodID(env, bridge, "forward",
                                                      "(Ljava/lang/Object;[JJZ)V");
        deft_java_backward = (*env)->GetStaticMethodID(env, bridge, "backward",
                                                       "(Ljava/lang/Object;J[JJ[J)V");
        (*env)->GetJavaVM(env, &deft_java_vm);
    }
    DeftCustomOpCallbacks cb = {num_inputs, deft_java_infer_cb, deft_java_forward_cb,
                                has_backward ? deft_java_backward_cb : NULL,
                                (*env)->NewGlobalRef(env, handler), NULL};
    int status = DeftCustomOpRegister(name, &cb);
    if (status != 0) (*env)->DeleteGlobalRef(env, (jobject)cb.user); /* not kept */
    return status;
}
%}
