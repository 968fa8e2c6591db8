# Find deft's dependencies by name and say plainly which are missing, with
# the Debian package that provides each.

set(DEFT_MISSING "")

macro(deft_require found what package)
    if(NOT ${found})
        list(APPEND DEFT_MISSING "${what} (Debian package ${package})")
    endif()
endmacro()

find_path(CBLAS_INCLUDE_DIR cblas.h PATH_SUFFIXES openblas x86_64-linux-gnu/openblas-pthread)
find_library(OPENBLAS_LIBRARY NAMES openblas)
deft_require(CBLAS_INCLUDE_DIR "OpenBLAS header cblas.h" libopenblas-dev)
deft_require(OPENBLAS_LIBRARY "OpenBLAS library" libopenblas-dev)

find_path(CJSON_INCLUDE_DIR cjson/cJSON.h)
find_library(CJSON_LIBRARY NAMES cjson)
deft_require(CJSON_INCLUDE_DIR "cJSON header cjson/cJSON.h" libcjson-dev)
deft_require(CJSON_LIBRARY "cJSON library" libcjson-dev)

find_path(DLPACK_INCLUDE_DIR dlpack/dlpack.h)
deft_require(DLPACK_INCLUDE_DIR "DLPack header dlpack/dlpack.h" libdlpack-dev)

find_package(Threads REQUIRED)

if(DEFT_BUILD_TESTS)
    find_package(PkgConfig)
    if(PKG_CONFIG_FOUND)
        pkg_check_modules(CHECK IMPORTED_TARGET check)
    endif()
    deft_require(CHECK_FOUND "Check unit-test framework (via pkg-config)" "check pkg-config")
endif()

find_package(Doxygen QUIET)
if(NOT DOXYGEN_FOUND)
    message(STATUS "deft: doxygen not found (Debian package doxygen); the 'docs' target is off")
endif()

if(DEFT_MISSING)
    list(JOIN DEFT_MISSING "\n  " missing_text)
    message(FATAL_ERROR "deft: missing dependencies:\n  ${missing_text}\n"
                        "Install them, or run scripts/test.sh, which installs them.")
endif()
