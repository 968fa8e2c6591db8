/*
 * GEMM through cuBLAS: one handle per device and stream, so that a handle's
 * workspace is never used by two streams at once, under a lock (threads
 * that share a stream number share the handle).
 */
#include <cublas_v2.h>
#include <pthread.h>

#include "core/base/error.h"
#include "core/gpu/gpu.h"
#include "core/gpu/kernels.h"

typedef struct blas_device {
    pthread_mutex_t lock;
    cublasHandle_t handle;
} blas_device_t;

static blas_device_t devices[DEFT_MAX_GPUS][DEFT_GPU_STREAMS];
static pthread_once_t init_once = PTHREAD_ONCE_INIT;

static void init_locks(void) {
    for (int d = 0; d < DEFT_MAX_GPUS; d++)
        for (int s = 0; s < DEFT_GPU_STREAMS; s++) pthread_mutex_init(&devices[d][s].lock, NULL);
}

static int blas_check(cublasStatus_t status, const char *what) {
    if (status == CUBLAS_STATUS_SUCCESS) return 0;
    return deft_error(
        status == CUBLAS_STATUS_ALLOC_FAILED ? DEFT_ERR_OUT_OF_MEMORY : DEFT_ERR_INTERNAL,
        "%s failed: %s (cuBLAS status %d)", what, cublasGetStatusString(status), (int)status);
}

/* The handle of the calling thread's stream, locked; unlock with release(). */
static int acquire(int dev, blas_device_t **held, cublasHandle_t *out) {
    deft_gpu_stream_t stream;
    pthread_once(&init_once, init_locks);
    if (deft_gpu_enter(dev, &stream)) return -1;
    blas_device_t *b = *held = &devices[dev][deft_gpu_thread_slot()];
    pthread_mutex_lock(&b->lock);
    int status = 0;
    if (!b->handle) status = blas_check(cublasCreate(&b->handle), "cublasCreate");
    if (status == 0) status = blas_check(cublasSetStream(b->handle, stream), "cublasSetStream");
    if (status) {
        pthread_mutex_unlock(&b->lock);
        return -1;
    }
    *out = b->handle;
    return 0;
}

static void release(blas_device_t *held) {
    pthread_mutex_unlock(&held->lock);
}

/*
 * Row-major C = op(A) op(B) is column-major C^T = op(B)^T op(A)^T: cuBLAS
 * gets the operands swapped, each with the leading dimension of its
 * row-major layout. Batches step through A, B and C by their strides.
 * float16 and bfloat16 accumulate in float32, as the CPU path does.
 */
int deft_gpu_gemm(int dev, const deft_gpu_gemm_t *g) {
    if (g->m == 0 || g->n == 0 || g->batch == 0) return 0;
    cublasHandle_t handle;
    blas_device_t *held;
    if (acquire(dev, &held, &handle)) return -1;
    int lda = (int)(g->ta ? g->m : g->k), ldb = (int)(g->tb ? g->k : g->n), ldc = (int)g->n;
    cublasOperation_t opa = g->ta ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasOperation_t opb = g->tb ? CUBLAS_OP_T : CUBLAS_OP_N;
    cublasStatus_t status;
    if (g->dtype == DEFT_DT_FLOAT32) {
        float alpha = 1.0f, beta = (float)g->beta;
        status = cublasSgemmStridedBatched(handle, opb, opa, (int)g->n, (int)g->m, (int)g->k,
                                           &alpha, g->b, ldb, g->stride_b, g->a, lda, g->stride_a,
                                           &beta, g->c, ldc, g->stride_c, (int)g->batch);
    } else if (g->dtype == DEFT_DT_FLOAT16 || g->dtype == DEFT_DT_BFLOAT16) {
        /* half operands, float32 accumulation: cuBLAS picks tensor-core kernels */
        cudaDataType_t type = g->dtype == DEFT_DT_FLOAT16 ? CUDA_R_16F : CUDA_R_16BF;
        float alpha = 1.0f, beta = (float)g->beta;
        /* One product: the plain call, whose kernel choice beat the batched
         * one's by 5-12% on an H200 (bench_gpu). */
        if (g->batch == 1)
            status = cublasGemmEx(handle, opb, opa, (int)g->n, (int)g->m, (int)g->k, &alpha, g->b,
                                  type, ldb, g->a, type, lda, &beta, g->c, type, ldc,
                                  CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
        else
            status = cublasGemmStridedBatchedEx(
                handle, opb, opa, (int)g->n, (int)g->m, (int)g->k, &alpha, g->b, type, ldb,
                g->stride_b, g->a, type, lda, g->stride_a, &beta, g->c, type, ldc, g->stride_c,
                (int)g->batch, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT);
    } else {
        double alpha = 1.0, beta = g->beta;
        status = cublasDgemmStridedBatched(handle, opb, opa, (int)g->n, (int)g->m, (int)g->k,
                                           &alpha, g->b, ldb, g->stride_b, g->a, lda, g->stride_a,
                                           &beta, g->c, ldc, g->stride_c, (int)g->batch);
    }
    release(held);
    return blas_check(status, "cuBLAS GEMM");
}
