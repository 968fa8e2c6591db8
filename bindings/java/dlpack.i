/*
 * DLPack for Java (included by typemaps.i): plain JNI functions behind the
 * native methods of org.deft.DLPack. A tensor is a DLManagedTensor pointer
 * held in a Java long; its memory is seen through a direct ByteBuffer
 * (NewDirectByteBuffer), and a direct ByteBuffer's memory becomes an array
 * through a tensor whose deleter drops the buffer's global reference.
 */

%ignore DeftNDArrayToDLPack;
%ignore DeftNDArrayFromDLPack;

%{
#include <stdio.h>

static JavaVM *deft_java_dlpack_vm;

static void deft_java_dlpack_error(JNIEnv *env, int kind, const char *message) {
    jclass cls = (*env)->FindClass(env, "org/deft/DeftException");
    jmethodID ctor = cls ? (*env)->GetMethodID(env, cls, "<init>", "(ILjava/lang/String;)V") : NULL;
    jstring text = ctor ? (*env)->NewStringUTF(env, message) : NULL;
    jobject error = text ? (*env)->NewObject(env, cls, ctor, (jint)kind, text) : NULL;
    if (error) (*env)->Throw(env, (jthrowable)error);
}

/* The tensor's bytes: elements times element size (compact, as deft makes them). */
static int64_t deft_java_dlpack_nbytes(const DLTensor *t) {
    int64_t n = (t->dtype.bits * (int64_t)t->dtype.lanes + 7) / 8;
    for (int i = 0; i < t->ndim; i++) n *= t->shape[i];
    return n;
}

JNIEXPORT jlong JNICALL Java_org_deft_DLPack_export(JNIEnv *env, jclass cls, jlong array) {
    (void)cls;
    DLManagedTensor *t = NULL;
    if (DeftNDArrayToDLPack((DeftNDArrayHandle)(intptr_t)array, &t) != 0) {
        deft_java_throw(env);
        return 0;
    }
    return (jlong)(intptr_t)t;
}

/* {dtype code, bits, lanes, device type, device id, ndim, shape...} */
JNIEXPORT jlongArray JNICALL Java_org_deft_DLPack_describe(JNIEnv *env, jclass cls, jlong tensor) {
    (void)cls;
    const DLTensor *t = &((DLManagedTensor *)(intptr_t)tensor)->dl_tensor;
    jlongArray out = (*env)->NewLongArray(env, 6 + t->ndim);
    if (!out) return NULL;
    jlong head[6] = {t->dtype.code,         t->dtype.bits,       t->dtype.lanes,
                     t->device.device_type, t->device.device_id, t->ndim};
    (*env)->SetLongArrayRegion(env, out, 0, 6, head);
    for (int i = 0; i < t->ndim; i++) {
        jlong d = t->shape[i];
        (*env)->SetLongArrayRegion(env, out, 6 + i, 1, &d);
    }
    return out;
}

JNIEXPORT jobject JNICALL Java_org_deft_DLPack_buffer(JNIEnv *env, jclass cls, jlong tensor) {
    (void)cls;
    const DLTensor *t = &((DLManagedTensor *)(intptr_t)tensor)->dl_tensor;
    if (t->device.device_type != kDLCPU) {
        deft_java_dlpack_error(env, DEFT_ERROR_VALUE,
                               "the tensor is not in CPU memory: copy it to the CPU first");
        return NULL;
    }
    return (*env)->NewDirectByteBuffer(env, (char *)t->data + t->byte_offset,
                                       (jlong)deft_java_dlpack_nbytes(t));
}

JNIEXPORT void JNICALL Java_org_deft_DLPack_free(JNIEnv *env, jclass cls, jlong tensor) {
    (void)env, (void)cls;
    DLManagedTensor *t = (DLManagedTensor *)(intptr_t)tensor;
    if (t->deleter) t->deleter(t);
}

JNIEXPORT jlong JNICALL Java_org_deft_DLPack_toArray(JNIEnv *env, jclass cls, jlong tensor) {
    (void)cls;
    DeftNDArrayHandle h = NULL;
    if (DeftNDArrayFromDLPack((DLManagedTensor *)(intptr_t)tensor, &h) != 0) {
        deft_java_throw(env);
        return 0;
    }
    return (jlong)(intptr_t)h;
}

/* A tensor over a direct ByteBuffer's memory, holding a global reference to it. */
typedef struct {
    DLManagedTensor tensor;
    jobject buffer;
    int64_t shape[DEFT_MAX_NDIM];
} deft_java_lent;

/* This thread's JNIEnv: the last user of the memory may be an engine thread, attached
 * then (as a daemon). NULL if that fails. */
static JNIEnv *deft_java_dlpack_env(void) {
    JavaVM *vm = deft_java_dlpack_vm;
    JNIEnv *env = NULL;
    if ((*vm)->GetEnv(vm, (void **)&env, JNI_VERSION_1_8) == JNI_OK) return env;
    return (*vm)->AttachCurrentThreadAsDaemon(vm, (void **)&env, NULL) == JNI_OK ? env : NULL;
}

static void deft_java_lent_free(DLManagedTensor *t) {
    deft_java_lent *lent = t->manager_ctx;
    JNIEnv *env = deft_java_dlpack_env();
    if (env) (*env)->DeleteGlobalRef(env, lent->buffer);
    free(lent);
}

JNIEXPORT jlong JNICALL Java_org_deft_DLPack_fromBuffer(JNIEnv *env, jclass cls, jobject buffer,
                                                        jint code, jint bits, jlongArray shape) {
    (void)cls;
    char *data = (*env)->GetDirectBufferAddress(env, buffer);
    jsize ndim = (*env)->GetArrayLength(env, shape);
    if (!data) {
        deft_java_dlpack_error(env, DEFT_ERROR_VALUE, "the buffer is not a direct ByteBuffer");
        return 0;
    }
    if (ndim > DEFT_MAX_NDIM) {
        deft_java_dlpack_error(env, DEFT_ERROR_VALUE,
                               "the shape has more dimensions than deft's 8");
        return 0;
    }
    deft_java_lent *lent = calloc(1, sizeof *lent);
    if (!lent) {
        deft_java_dlpack_error(env, DEFT_ERROR_OUT_OF_MEMORY, "out of memory");
        return 0;
    }
    (*env)->GetLongArrayRegion(env, shape, 0, ndim, (jlong *)lent->shape);
    DLTensor *t = &lent->tensor.dl_tensor;
    t->data = data;
    t->device.device_type = kDLCPU;
    t->ndim = (int)ndim;
    t->dtype.code = (uint8_t)code;
    t->dtype.bits = (uint8_t)bits;
    t->dtype.lanes = 1;
    t->shape = lent->shape;
    int64_t need = deft_java_dlpack_nbytes(t);
    if (need > (*env)->GetDirectBufferCapacity(env, buffer)) {
        free(lent);
        char text[160];
        snprintf(text, sizeof text, "the shape needs %lld bytes but the buffer holds %lld",
                 (long long)need, (long long)(*env)->GetDirectBufferCapacity(env, buffer));
        deft_java_dlpack_error(env, DEFT_ERROR_VALUE, text);
        return 0;
    }
    (*env)->GetJavaVM(env, &deft_java_dlpack_vm);
    lent->buffer = (*env)->NewGlobalRef(env, buffer);
    lent->tensor.manager_ctx = lent;
    lent->tensor.deleter = deft_java_lent_free;
    DeftNDArrayHandle h = NULL;
    if (DeftNDArrayFromDLPack(&lent->tensor, &h) != 0) {
        (*env)->DeleteGlobalRef(env, lent->buffer); /* on failure the tensor is still ours */
        free(lent);
        deft_java_throw(env);
        return 0;
    }
    return (jlong)(intptr_t)h;
}
%}
