/*
 * float16 and bfloat16 in the GPU kernels: stored as CUDA's __half and
 * __nv_bfloat16, computed in float32. A kernel templated on its storage
 * type T loads each element with widen() into Wide<T> (T itself for float,
 * double and the integers; float for the half types), computes there, and
 * stores with narrow<T>(), which rounds once to nearest even, as the CPU's
 * deft_half_narrow (core/op/half_compute.h): so one kernel body serves
 * every dtype, and a half operator gives the float32 result rounded once.
 *
 * The conversions are the hardware's (cvt.rn; exact widening, subnormals
 * kept); they give the bits of dtype_math.h's deft_float_to_half and
 * deft_float_to_bf16 except for NaN payloads (both give a NaN).
 */
#ifndef DEFT_CORE_GPU_HALF_CUH
#define DEFT_CORE_GPU_HALF_CUH

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <type_traits>

namespace {

/* The type a kernel computes an element of storage type T in. */
template <typename T> struct WideOf { typedef T type; };
template <> struct WideOf<__half> { typedef float type; };
template <> struct WideOf<__nv_bfloat16> { typedef float type; };
template <typename T> using Wide = typename WideOf<T>::type;

/* Whether T holds floating-point values (the half types included): NaN
 * rules, float accumulation and the float-only functions apply. */
template <typename T>
constexpr bool is_float_like = std::is_floating_point<T>::value || std::is_same<T, __half>::value ||
                               std::is_same<T, __nv_bfloat16>::value;

template <typename T> __device__ inline Wide<T> widen(T x) {
    return x;
}
template <> __device__ inline float widen<__half>(__half x) {
    return __half2float(x);
}
template <> __device__ inline float widen<__nv_bfloat16>(__nv_bfloat16 x) {
    return __bfloat162float(x);
}

template <typename T> __device__ inline T narrow(Wide<T> x) {
    return x;
}
template <> __device__ inline __half narrow<__half>(float x) {
    return __float2half_rn(x);
}
template <> __device__ inline __nv_bfloat16 narrow<__nv_bfloat16>(float x) {
    return __float2bfloat16_rn(x);
}

} // namespace

#endif
