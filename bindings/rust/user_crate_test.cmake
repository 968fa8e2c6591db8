# A user's binary crate outside the tree, as the README's Rust section shows
# it (its Cargo.toml and src/main.rs are read from README.md, so the two
# agree): it depends on `deft` alone and has no build.rs. Built with
# `cargo build --offline` and run with an empty LD_LIBRARY_PATH, three ways:
#   - against an install: `cmake --install` into a temporary prefix, then
#     PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig;
#   - against the build tree: PKG_CONFIG_PATH=<build>/pkgconfig;
#   - with no pkg-config knowing deft, when the build folder is
#     <checkout>/build (deft-sys's in-tree fallback).
# Each run must print the README's result, and load libdeft from the folder
# it was built against (the loader's trace, LD_DEBUG=libs, says which).
# Run with -DCARGO=<cargo> -DSOURCE_DIR=<checkout> -DBUILD_DIR=<build>
#          -DLIBDIR=<lib dir name> -DWORK_DIR=<scratch folder>
file(REMOVE_RECURSE ${WORK_DIR})
set(ENV{CARGO_INCREMENTAL} 0) # built once: incremental state would only take disk
file(MAKE_DIRECTORY ${WORK_DIR}/hello/src)

include(${SOURCE_DIR}/cmake/user_project.cmake)
readme_block("# Cargo.toml" cargo_toml)
readme_block("// src/main.rs" main_rs)
string(REPLACE "/path/to/deft" "${SOURCE_DIR}" cargo_toml "${cargo_toml}")
file(WRITE ${WORK_DIR}/hello/Cargo.toml "${cargo_toml}")
file(WRITE ${WORK_DIR}/hello/src/main.rs "${main_rs}")

# build_and_run(<name> <folder libdeft must be loaded from>)
function(build_and_run name libdir)
    set(ENV{CARGO_TARGET_DIR} ${WORK_DIR}/target-${name})
    execute_process(COMMAND ${CARGO} build --offline --quiet
                    WORKING_DIRECTORY ${WORK_DIR}/hello RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${name}: cargo build failed (${rc}):\n${out}${err}")
    endif()
    set(ENV{LD_LIBRARY_PATH} "")
    set(ENV{LD_DEBUG} libs)
    execute_process(COMMAND ${WORK_DIR}/target-${name}/debug/hello RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE trace)
    unset(ENV{LD_DEBUG})
    if(NOT rc EQUAL 0 OR NOT out STREQUAL "[0.0, 2.0, 3.0]\n")
        message(FATAL_ERROR "${name}: exit ${rc}, printed '${out}', want '[0.0, 2.0, 3.0]'\n${trace}")
    endif()
    get_filename_component(libdir_real ${libdir} REALPATH)
    if(NOT trace MATCHES "init: ${libdir_real}/libdeft\\.so")
        message(FATAL_ERROR "${name}: libdeft was not loaded from ${libdir_real}:\n${trace}")
    endif()
    message(STATUS "${name}: cargo build and run: ${out}")
    file(REMOVE_RECURSE ${WORK_DIR}/target-${name}) # ~80 MB each: keep a build's disk use small
endfunction()

install_prefix(prefix)
unset(ENV{DEFT_LIB_DIR})
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
build_and_run(installed ${prefix}/${LIBDIR})

set(ENV{PKG_CONFIG_PATH} ${BUILD_DIR}/pkgconfig)
build_and_run(build-tree ${BUILD_DIR})

build_is_in_tree(in_tree)
if(in_tree)
    set(ENV{PKG_CONFIG_PATH} /nonexistent)
    set(ENV{PKG_CONFIG_LIBDIR} /nonexistent)
    build_and_run(in-tree ${SOURCE_DIR}/build)
else()
    message(STATUS "in-tree: skipped, the build folder is not ${SOURCE_DIR}/build")
endif()
