# The CUDA backend (core/gpu): DEFT_CUDA=auto builds it when nvcc is found
# (on PATH or in /usr/local/cuda), on requires it, off leaves it out. The
# library works the same without it, minus GPUs. Sets DEFT_HAVE_CUDA.

set(DEFT_CUDA auto CACHE STRING "Build the CUDA backend: auto (when nvcc is found), on or off")
set_property(CACHE DEFT_CUDA PROPERTY STRINGS auto on off)
if(NOT DEFT_CUDA MATCHES "^(auto|on|off)$")
    message(FATAL_ERROR "DEFT_CUDA is '${DEFT_CUDA}', expected auto, on or off")
endif()

set(DEFT_HAVE_CUDA OFF)
if(DEFT_CUDA STREQUAL "auto" AND DEFT_SANITIZE)
    # nvcc's objects and the CUDA runtime are not built for the sanitizers.
    message(STATUS "deft: CUDA backend off in the ${DEFT_SANITIZE} sanitizer build")
elseif(NOT DEFT_CUDA STREQUAL "off")
    if(NOT CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND EXISTS /usr/local/cuda/bin/nvcc)
        set(CMAKE_CUDA_COMPILER /usr/local/cuda/bin/nvcc)
    endif()
    include(CheckLanguage)
    check_language(CUDA)
    if(CMAKE_CUDA_COMPILER)
        set(DEFT_HAVE_CUDA ON)
    elseif(DEFT_CUDA STREQUAL "on")
        message(FATAL_ERROR "DEFT_CUDA is on but no CUDA compiler (nvcc) was found")
    else()
        message(STATUS "deft: nvcc not found, building without the CUDA backend")
    endif()
endif()

if(DEFT_HAVE_CUDA)
    if(NOT CMAKE_CUDA_ARCHITECTURES)
        # Machine code for the A100 (sm_80) and the H100/H200 (sm_90), both
        # from one compute_80 PTX, which is embedded too for later GPUs to
        # compile: nvcc's front end (cicc) runs once, not once per GPU, a
        # quarter of the release build's CUDA time (map.cu 197 -> 144 s).
        # No kernel of ours uses an sm_90 feature.
        set(CMAKE_CUDA_ARCHITECTURES OFF)
        set(DEFT_CUDA_GENCODE --generate-code=arch=compute_80,code=[compute_80,sm_80,sm_90])
        set(DEFT_CUDA_TARGETS "sm_80 and sm_90 from compute_80")
    else()
        set(DEFT_CUDA_TARGETS "architectures ${CMAKE_CUDA_ARCHITECTURES}")
    endif()
    enable_language(CUDA)
    if(DEFT_CUDA_GENCODE)
        string(APPEND CMAKE_CUDA_FLAGS " ${DEFT_CUDA_GENCODE}")
    endif()
    set(CMAKE_CUDA_STANDARD 17)
    set(CMAKE_CUDA_STANDARD_REQUIRED ON)
    find_package(CUDAToolkit REQUIRED)
    message(STATUS "deft: CUDA backend on (CUDA ${CUDAToolkit_VERSION}, "
                   "${DEFT_CUDA_TARGETS})")
endif()
