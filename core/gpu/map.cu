/*
 * Elementwise maps: every unary, binary, scalar, clip, copy, cast and where
 * operator on the GPU, chains of them fused into one kernel, and add_n.
 * One grid-stride kernel template per (function, dtype); the function is a
 * functor over the shared scalar math. float16 and bfloat16 run the float
 * functions in float32 (half.cuh): each element widened, computed, and
 * rounded once, as on the CPU.
 */
#define DEFT_DEVICE_FN __host__ __device__ static inline
#include "core/gpu/gpu.h"
#include "core/gpu/half.cuh"
#include "core/gpu/launch.cuh"
#include "core/gpu/gpu_index.h"
#include "core/gpu/kernels.h"
#include "core/math/dtype_math.h"
#include "core/math/scalar_math.h"

#include <cuda_runtime_api.h>

#include <type_traits>

#include "core/base/error.h"

namespace {

/* A double in dtype T as the CPU kernels convert it (integers saturate). */
template <typename T> __host__ __device__ T from_double(double v);
template <> __host__ __device__ float from_double<float>(double v) {
    return (float)v;
}
template <> __host__ __device__ double from_double<double>(double v) {
    return v;
}
template <> __host__ __device__ int32_t from_double<int32_t>(double v) {
    return deft_to_i32(v);
}
template <> __host__ __device__ int64_t from_double<int64_t>(double v) {
    return deft_to_i64(v);
}
template <> __host__ __device__ uint8_t from_double<uint8_t>(double v) {
    return deft_to_u8(v);
}
/* the half types through float32, as the CPU's scalar operands */
template <> __host__ __device__ __half from_double<__half>(double v) {
    return __float2half_rn((float)v);
}
template <> __host__ __device__ __nv_bfloat16 from_double<__nv_bfloat16>(double v) {
    return __float2bfloat16_rn((float)v);
}

/* Operand k's element at off as stored, and as computed (widened). */
template <typename T> __device__ T stored(const deft_gpu_map_t &m, int k, int64_t off) {
    return m.base[k] ? static_cast<const T *>(m.base[k])[off] : from_double<T>(m.scalars[k]);
}
template <typename T> __device__ Wide<T> operand(const deft_gpu_map_t &m, int k, int64_t off) {
    return widen(stored<T>(m, k, off));
}

/* ---- functors: overloads per dtype over the shared math ---- */

#define FLOAT_OVERLOADS_1(name, expr)                                                              \
    __device__ inline float f_##name(float x) {                                                    \
        return deft_##name##_f(x);                                                                 \
    }                                                                                              \
    __device__ inline double f_##name(double x) {                                                  \
        return deft_##name##_d(x);                                                                 \
    }
DEFT_UNARY_FLOAT_MATH(FLOAT_OVERLOADS_1)
DEFT_ACTIVATION_UNARY_MATH(FLOAT_OVERLOADS_1)
#define FLOAT_OVERLOADS_2(name, expr)                                                              \
    __device__ inline float f_##name(float a, float b) {                                           \
        return deft_##name##_f(a, b);                                                              \
    }                                                                                              \
    __device__ inline double f_##name(double a, double b) {                                        \
        return deft_##name##_d(a, b);                                                              \
    }
DEFT_BINARY_FLOAT_MATH(FLOAT_OVERLOADS_2)
DEFT_ACTIVATION_BINARY_MATH(FLOAT_OVERLOADS_2)
DEFT_GRAD_BINARY_MATH(FLOAT_OVERLOADS_2)

/* The functions integers have, by name (scalar_math.h's integer section). */
#define INT_UNARY(X) X(negative) X(abs) X(sign) X(square) X(relu) X(logical_not)
#define INT_BINARY(X)                                                                              \
    X(add)                                                                                         \
    X(sub)                                                                                         \
    X(mul)                                                                                         \
    X(div)                                                                                         \
    X(power)                                                                                       \
    X(maximum)                                                                                     \
    X(minimum)                                                                                     \
    X(equal)                                                                                       \
    X(not_equal)                                                                                   \
    X(greater)                                                                                     \
    X(greater_equal)                                                                               \
    X(lesser)                                                                                      \
    X(lesser_equal)                                                                                \
    X(hypot) X(logical_and) X(logical_or) X(logical_xor) X(mod) X(floor_divide) X(remainder)        \
    X(relu_grad)
#define INT_OVERLOADS_1(name)                                                                      \
    __device__ inline int32_t f_##name(int32_t x) {                                                \
        return deft_##name##_i32(x);                                                               \
    }                                                                                              \
    __device__ inline int64_t f_##name(int64_t x) {                                                \
        return deft_##name##_i64(x);                                                               \
    }                                                                                              \
    __device__ inline uint8_t f_##name(uint8_t x) {                                                \
        return deft_##name##_u8(x);                                                                \
    }
INT_UNARY(INT_OVERLOADS_1)
#define INT_OVERLOADS_2(name)                                                                      \
    __device__ inline int32_t f_##name(int32_t a, int32_t b) {                                     \
        return deft_##name##_i32(a, b);                                                            \
    }                                                                                              \
    __device__ inline int64_t f_##name(int64_t a, int64_t b) {                                     \
        return deft_##name##_i64(a, b);                                                            \
    }                                                                                              \
    __device__ inline uint8_t f_##name(uint8_t a, uint8_t b) {                                     \
        return deft_##name##_u8(a, b);                                                             \
    }
INT_BINARY(INT_OVERLOADS_2)

#define UNARY_FUNCTOR(name, ...)                                                                   \
    struct U_##name {                                                                              \
        template <typename T> __device__ T operator()(T x) const { return f_##name(x); }           \
    };
DEFT_UNARY_FLOAT_MATH(UNARY_FUNCTOR)
DEFT_ACTIVATION_UNARY_MATH(UNARY_FUNCTOR)
#define BINARY_FUNCTOR(name, ...)                                                                  \
    struct B_##name {                                                                              \
        template <typename T> __device__ T operator()(T a, T b) const { return f_##name(a, b); }   \
    };
DEFT_BINARY_FLOAT_MATH(BINARY_FUNCTOR)
DEFT_ACTIVATION_BINARY_MATH(BINARY_FUNCTOR)
DEFT_GRAD_BINARY_MATH(BINARY_FUNCTOR)

/* ---- kernels ---- */

/*
 * Unary and binary maps are most of the elementwise work. Merged to one
 * dimension (dense work), each thread takes kUnroll elements a block apart and
 * loads them all before it stores any: the compiler cannot move a load above
 * a store that may alias it, and one element per thread keeps too few bytes in
 * flight to reach the memory's bandwidth.
 */
constexpr int kUnroll = 4;

/* Blocks for n elements taken kUnroll a thread. */
inline int dense_blocks(int64_t n) {
    return blocks_for((n + kUnroll - 1) / kUnroll);
}

#define DENSE_STEPS(i0, n)                                                                         \
    for (int64_t i0 = blockIdx.x * (int64_t)blockDim.x * kUnroll + threadIdx.x; i0 < (n);          \
         i0 += (int64_t)gridDim.x * blockDim.x * kUnroll)

template <typename T, int Inputs, typename F>
__device__ void dense_map(const deft_gpu_map_t &m, F f) {
    DENSE_STEPS(i0, m.size) {
        Wide<T> x[Inputs][kUnroll];
        for (int u = 0; u < kUnroll; u++) {
            int64_t i = i0 + (int64_t)u * blockDim.x;
            for (int k = 0; k < Inputs; k++)
                x[k][u] = i < m.size ? operand<T>(m, k + 1, i * m.strides[k + 1][0]) : Wide<T>();
        }
        for (int u = 0; u < kUnroll; u++) {
            int64_t i = i0 + (int64_t)u * blockDim.x;
            if (i >= m.size) break;
            T *out = static_cast<T *>(m.base[0]) + i * m.strides[0][0];
            if constexpr (Inputs == 1)
                *out = narrow<T>(f(x[0][u]));
            else
                *out = narrow<T>(f(x[0][u], x[1][u]));
        }
    }
}

template <typename T, typename F> __global__ void unary_kernel(deft_gpu_map_t m, F f) {
    if (m.ndim == 1) return dense_map<T, 1>(m, f);
    GRID_STRIDE(i, m.size) {
        int64_t off[2];
        deft_gpu_offsets(&m, 2, i, off);
        static_cast<T *>(m.base[0])[off[0]] = narrow<T>(f(operand<T>(m, 1, off[1])));
    }
}

template <typename T, typename F> __global__ void binary_kernel(deft_gpu_map_t m, F f) {
    if (m.ndim == 1) return dense_map<T, 2>(m, f);
    GRID_STRIDE(i, m.size) {
        int64_t off[3];
        deft_gpu_offsets(&m, 3, i, off);
        static_cast<T *>(m.base[0])[off[0]] =
            narrow<T>(f(operand<T>(m, 1, off[1]), operand<T>(m, 2, off[2])));
    }
}

/* The bounds in the type computed in: a half's are float32, as the CPU's. */
template <typename T> __global__ void clip_kernel(deft_gpu_map_t m, Wide<T> lo, Wide<T> hi) {
    GRID_STRIDE(i, m.size) {
        int64_t off[2];
        deft_gpu_offsets(&m, 2, i, off);
        Wide<T> v = operand<T>(m, 1, off[1]);
        static_cast<T *>(m.base[0])[off[0]] = narrow<T>(v < lo ? lo : v > hi ? hi : v);
    }
}

template <typename T> __global__ void fill_kernel(deft_gpu_map_t m, T value) {
    GRID_STRIDE(i, m.size) {
        int64_t off[1];
        deft_gpu_offsets(&m, 1, i, off);
        static_cast<T *>(m.base[0])[off[0]] = value;
    }
}

template <typename T> __global__ void copy_kernel(deft_gpu_map_t m) {
    GRID_STRIDE(i, m.size) {
        int64_t off[2];
        deft_gpu_offsets(&m, 2, i, off);
        static_cast<T *>(m.base[0])[off[0]] = static_cast<const T *>(m.base[1])[off[1]];
    }
}

__global__ void cast_kernel(deft_gpu_map_t m) {
    GRID_STRIDE(i, m.size) {
        int64_t off[2];
        deft_gpu_offsets(&m, 2, i, off);
        deft_store_double(m.base[0], m.dtype[0], off[0],
                          deft_load_double(m.base[1], m.dtype[1], off[1]));
    }
}

template <typename T> __global__ void where_kernel(deft_gpu_map_t m) {
    GRID_STRIDE(i, m.size) {
        int64_t off[4];
        deft_gpu_offsets(&m, 4, i, off);
        bool c = deft_load_double(m.base[1], m.dtype[1], off[1]) != 0;
        static_cast<T *>(m.base[0])[off[0]] = c ? stored<T>(m, 2, off[2]) : stored<T>(m, 3, off[3]);
    }
}

template <typename T> __global__ void add_n_kernel(deft_gpu_add_n_t a) {
    GRID_STRIDE(i, a.n) {
        double sum = 0; /* in double, as the CPU's add_n */
        for (int k = 0; k < a.nin; k++) sum += (double)widen(static_cast<const T *>(a.x[k])[i]);
        static_cast<T *>(a.y)[i] = from_double<T>(sum);
    }
}

/* ---- launching ---- */

#define LAUNCH_ON(blocks, kernel, ...)                                                             \
    do {                                                                                           \
        kernel<<<blocks, kThreads, 0, stream>>>(__VA_ARGS__);                                      \
        return true;                                                                               \
    } while (0)
#define LAUNCH(kernel, ...) LAUNCH_ON(blocks_for(m.size), kernel, __VA_ARGS__)
/* unary and binary kernels: dense work takes kUnroll elements a thread */
#define LAUNCH_MAP(kernel, ...)                                                                    \
    LAUNCH_ON(m.ndim == 1 ? dense_blocks(m.size) : blocks_for(m.size), kernel, __VA_ARGS__)

template <typename T> bool launch_typed(const deft_gpu_map_t &m, cudaStream_t stream) {
    switch (m.fn) {
#define FLOAT_UNARY_CASE(name, ...)                                                                \
    case DEFT_GPU_FN_##name:                                                                       \
        if constexpr (!std::is_integral<T>::value) LAUNCH_MAP(unary_kernel<T>, m, U_##name());     \
        return false;
#define FLOAT_BINARY_CASE(name, ...)                                                               \
    case DEFT_GPU_FN_##name:                                                                       \
        LAUNCH_MAP(binary_kernel<T>, m, B_##name());
#define FLOAT_ONLY_BINARY_CASE(name, ...)                                                          \
    case DEFT_GPU_FN_##name:                                                                       \
        if constexpr (!std::is_integral<T>::value) LAUNCH_MAP(binary_kernel<T>, m, B_##name());    \
        return false;
        DEFT_UNARY_FLOAT_MATH(FLOAT_UNARY_CASE)
        DEFT_ACTIVATION_UNARY_MATH(FLOAT_UNARY_CASE)
        DEFT_ACTIVATION_BINARY_MATH(FLOAT_ONLY_BINARY_CASE)
        DEFT_GRAD_BINARY_MATH(FLOAT_ONLY_BINARY_CASE)
        DEFT_BINARY_FLOAT_MATH(FLOAT_BINARY_CASE)
    case DEFT_GPU_FN_CLIP:
        LAUNCH(clip_kernel<T>, m, from_double<Wide<T>>(m.scalars[2]),
               from_double<Wide<T>>(m.scalars[3]));
    case DEFT_GPU_FN_FILL:
        LAUNCH(fill_kernel<T>, m, from_double<T>(m.scalars[1]));
    case DEFT_GPU_FN_WHERE:
        LAUNCH(where_kernel<T>, m);
    default:
        return false;
    }
}

/* Integers: only the functions scalar_math.h defines for them. */
#define INT_UNARY_CASE(name)                                                                       \
    case DEFT_GPU_FN_##name:                                                                       \
        return true;
bool int_supports(deft_gpu_fn_t fn) {
    switch (fn) {
        INT_UNARY(INT_UNARY_CASE)
    default:
        return fn >= DEFT_GPU_FN_add; /* every binary function, clip, fill, where */
    }
}

template <typename T> bool launch_int(const deft_gpu_map_t &m, cudaStream_t stream) {
    switch (m.fn) {
#define INT_UNARY_LAUNCH(name)                                                                     \
    case DEFT_GPU_FN_##name:                                                                       \
        LAUNCH_MAP(unary_kernel<T>, m, U_##name());
        INT_UNARY(INT_UNARY_LAUNCH)
    default:
        return m.fn >= DEFT_GPU_FN_add && launch_typed<T>(m, stream);
    }
}

bool launch_copy(const deft_gpu_map_t &m, cudaStream_t stream) {
    switch (deft_dtype_size(m.dtype[0])) {
    case 1:
        LAUNCH(copy_kernel<uint8_t>, m);
    case 2:
        LAUNCH(copy_kernel<uint16_t>, m);
    case 4:
        LAUNCH(copy_kernel<uint32_t>, m);
    default:
        LAUNCH(copy_kernel<uint64_t>, m);
    }
}

bool launch(const deft_gpu_map_t &m, cudaStream_t stream) {
    if (m.fn == DEFT_GPU_FN_COPY) return launch_copy(m, stream);
    if (m.fn == DEFT_GPU_FN_CAST) LAUNCH(cast_kernel, m);
    switch (m.dtype[0]) {
    case DEFT_DT_FLOAT32:
        return launch_typed<float>(m, stream);
    case DEFT_DT_FLOAT64:
        return launch_typed<double>(m, stream);
    case DEFT_DT_FLOAT16:
        return launch_typed<__half>(m, stream);
    case DEFT_DT_BFLOAT16:
        return launch_typed<__nv_bfloat16>(m, stream);
    case DEFT_DT_INT32:
        return launch_int<int32_t>(m, stream);
    case DEFT_DT_INT64:
        return launch_int<int64_t>(m, stream);
    case DEFT_DT_UINT8:
        return launch_int<uint8_t>(m, stream);
    default:
        return false;
    }
}

/* ---- fused chains: the steps in registers, one store ---- */

/* Values are held as computed (Wide<T>); with a half type each step's
 * result is rounded to it, as the unfused steps store it, so a chain gives
 * the unfused graph's bits. */

/* A step's scalar k as computed (converted on the host, deft_gpu_fused: a
 * conversion from double per element and step would cost more than the
 * chain saves). */
template <typename T> __device__ Wide<T> chain_scalar(const deft_gpu_fused_step_t &st, int k) {
    if constexpr (std::is_same<Wide<T>, double>::value)
        return st.scalars[k];
    else
        return st.scalars_f[k];
}

/* Operand k of a step for kUnroll elements a block apart from i0 (the
 * dense maps' layout), each lane of value[] holding those elements. */
template <typename T>
__device__ void chain_operand(const deft_gpu_fused_t &c, const deft_gpu_fused_step_t &st, int k,
                              const Wide<T> (*value)[kUnroll], int64_t i0, Wide<T> *out) {
    int src = st.src[k];
    for (int u = 0; u < kUnroll; u++) {
        int64_t i = i0 + (int64_t)u * blockDim.x;
        out[u] = src == DEFT_GPU_FUSED_SCALAR ? chain_scalar<T>(st, k)
                 : src < 0                    ? value[-1 - src][u]
                 : i < c.size ? widen(static_cast<const T *>(c.in[src])[i * c.in_stride[src]])
                              : Wide<T>();
    }
}

/* The same functions, and clip's comparison, as the maps apply; the switch
 * is taken once per step for kUnroll elements. */
template <typename T>
__device__ void chain_step(const deft_gpu_fused_step_t &st, const Wide<T> *a, const Wide<T> *b,
                           Wide<T> *out) {
    switch (st.fn) {
#define CHAIN_UNARY(name, ...)                                                                     \
    case DEFT_GPU_FN_##name:                                                                       \
        for (int u = 0; u < kUnroll; u++) out[u] = f_##name(a[u]);                                 \
        return;
        DEFT_UNARY_FLOAT_MATH(CHAIN_UNARY)
        DEFT_ACTIVATION_UNARY_MATH(CHAIN_UNARY)
#define CHAIN_BINARY(name, ...)                                                                    \
    case DEFT_GPU_FN_##name:                                                                       \
        for (int u = 0; u < kUnroll; u++) out[u] = f_##name(a[u], b[u]);                           \
        return;
        DEFT_BINARY_FLOAT_MATH(CHAIN_BINARY)
        DEFT_ACTIVATION_BINARY_MATH(CHAIN_BINARY)
        DEFT_GRAD_BINARY_MATH(CHAIN_BINARY)
    case DEFT_GPU_FN_CLIP: {
        Wide<T> lo = chain_scalar<T>(st, 2), hi = chain_scalar<T>(st, 3);
        for (int u = 0; u < kUnroll; u++) out[u] = a[u] < lo ? lo : a[u] > hi ? hi : a[u];
        return;
    }
    default:
        for (int u = 0; u < kUnroll; u++) out[u] = a[u];
    }
}

template <typename T> __global__ void chain_kernel(deft_gpu_fused_t c) {
    DENSE_STEPS(i0, c.size) {
        Wide<T> value[DEFT_GPU_FUSED_MAX_STEPS][kUnroll], a[kUnroll], b[kUnroll];
        for (int s = 0; s < c.nsteps; s++) {
            const deft_gpu_fused_step_t &st = c.steps[s];
            chain_operand<T>(c, st, 1, value, i0, a);
            chain_operand<T>(c, st, 2, value, i0, b);
            chain_step<T>(st, a, b, value[s]);
            if constexpr (!std::is_same<T, Wide<T>>::value)
                for (int u = 0; u < kUnroll; u++) value[s][u] = widen(narrow<T>(value[s][u]));
        }
        for (int u = 0; u < kUnroll; u++) {
            int64_t i = i0 + (int64_t)u * blockDim.x;
            if (i < c.size) static_cast<T *>(c.out)[i] = narrow<T>(value[c.nsteps - 1][u]);
        }
    }
}

/* A step's scalar k as the map would take it: as a half operand rounded to
 * the half type first (from_double), clip's bounds (k 2 and 3) as float32. */
float chain_scalar_f(deft_dtype_t dtype, const deft_gpu_fused_step_t &st, int k) {
    bool bound = st.fn == DEFT_GPU_FN_CLIP && k >= 2;
    if (dtype == DEFT_DT_FLOAT16 && !bound) return __half2float(from_double<__half>(st.scalars[k]));
    if (dtype == DEFT_DT_BFLOAT16 && !bound)
        return __bfloat162float(from_double<__nv_bfloat16>(st.scalars[k]));
    return from_double<float>(st.scalars[k]);
}

template <typename T> void launch_chain(const deft_gpu_fused_t &chain, cudaStream_t stream) {
    chain_kernel<T><<<dense_blocks(chain.size), kThreads, 0, stream>>>(chain);
}

} // namespace

extern "C" bool deft_gpu_fused_supports(deft_gpu_fn_t fn, deft_dtype_t dtype) {
    return (dtype == DEFT_DT_FLOAT32 || dtype == DEFT_DT_FLOAT64 || dtype == DEFT_DT_FLOAT16 ||
            dtype == DEFT_DT_BFLOAT16) &&
           fn <= DEFT_GPU_FN_CLIP;
}

extern "C" int deft_gpu_fused(int dev, const deft_gpu_fused_t *c) {
    if (c->size == 0) return 0;
    if (c->nsteps < 1 || c->nsteps > DEFT_GPU_FUSED_MAX_STEPS)
        return deft_error(DEFT_ERR_INTERNAL, "a fused chain of %d steps", c->nsteps);
    deft_gpu_fused_t chain = *c;
    for (int s = 0; s < chain.nsteps; s++)
        for (int k = 0; k < 4; k++)
            chain.steps[s].scalars_f[k] = chain_scalar_f(c->dtype, chain.steps[s], k);
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    switch (c->dtype) {
    case DEFT_DT_FLOAT64:
        launch_chain<double>(chain, stream);
        break;
    case DEFT_DT_FLOAT16:
        launch_chain<__half>(chain, stream);
        break;
    case DEFT_DT_BFLOAT16:
        launch_chain<__nv_bfloat16>(chain, stream);
        break;
    default:
        launch_chain<float>(chain, stream);
    }
    return deft_gpu_check(cudaGetLastError(), "launching a fused chain");
}

extern "C" const char *deft_gpu_fn_name(deft_gpu_fn_t fn) {
    static const char *const names[] = {
#define FN_NAME(name, ...) #name,
        DEFT_UNARY_FLOAT_MATH(FN_NAME) DEFT_ACTIVATION_UNARY_MATH(FN_NAME)
            DEFT_ACTIVATION_BINARY_MATH(FN_NAME) DEFT_GRAD_BINARY_MATH(FN_NAME)
                DEFT_BINARY_FLOAT_MATH(FN_NAME) "clip",
        "copy", "cast", "fill", "where"};
    static_assert(sizeof names / sizeof names[0] == DEFT_GPU_FN_COUNT, "a name per function");
    return fn >= 0 && fn < DEFT_GPU_FN_COUNT ? names[fn] : "?";
}

extern "C" bool deft_gpu_map_supports(deft_gpu_fn_t fn, deft_dtype_t dtype) {
    if (fn == DEFT_GPU_FN_COPY || fn == DEFT_GPU_FN_CAST) return true;
    switch (dtype) {
    case DEFT_DT_FLOAT32:
    case DEFT_DT_FLOAT64:
    case DEFT_DT_FLOAT16:
    case DEFT_DT_BFLOAT16:
        return true;
    case DEFT_DT_INT32:
    case DEFT_DT_INT64:
    case DEFT_DT_UINT8:
        return int_supports(fn);
    default:
        return false;
    }
}

extern "C" int deft_gpu_add_n(int dev, const deft_gpu_add_n_t *a) {
    if (a->n == 0) return 0;
    if (a->nin < 1 || a->nin > DEFT_GPU_ADD_N_MAX)
        return deft_error(DEFT_ERR_INTERNAL, "add_n of %d inputs on a GPU", a->nin);
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    const int blocks = blocks_for(a->n);
    switch (a->dtype) {
    case DEFT_DT_FLOAT32:
        add_n_kernel<float><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    case DEFT_DT_FLOAT64:
        add_n_kernel<double><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    case DEFT_DT_FLOAT16:
        add_n_kernel<__half><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    case DEFT_DT_BFLOAT16:
        add_n_kernel<__nv_bfloat16><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    case DEFT_DT_INT32:
        add_n_kernel<int32_t><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    case DEFT_DT_INT64:
        add_n_kernel<int64_t><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    case DEFT_DT_UINT8:
        add_n_kernel<uint8_t><<<blocks, kThreads, 0, stream>>>(*a);
        break;
    default:
        return deft_error(DEFT_ERR_TYPE, "no GPU kernel for add_n on %s",
                          deft_dtype_name(a->dtype));
    }
    return deft_gpu_check(cudaGetLastError(), "launching add_n");
}

extern "C" int deft_gpu_map(int dev, const deft_gpu_map_t *m) {
    if (deft_gpu_capture_map(m)) return 0;
    if (m->size == 0) return 0;
    if (!deft_gpu_map_supports(m->fn, m->fn == DEFT_GPU_FN_CAST ? m->dtype[1] : m->dtype[0]))
        return deft_error(DEFT_ERR_TYPE, "no GPU kernel for %s on %s", deft_gpu_fn_name(m->fn),
                          deft_dtype_name(m->fn == DEFT_GPU_FN_CAST ? m->dtype[1] : m->dtype[0]));
    deft_gpu_stream_t stream;
    if (deft_gpu_enter(dev, &stream)) return -1;
    launch(*m, stream);
    return deft_gpu_check(cudaGetLastError(), "launching a map kernel");
}
