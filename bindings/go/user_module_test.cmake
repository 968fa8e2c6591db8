# A user's Go module outside the tree, as the README's Go section shows it
# (its go.mod and main.go are read from README.md, so the two agree), built
# with plain `go build` three ways and run:
#   - against an install: `cmake --install` into a temporary prefix, then
#     PKG_CONFIG_PATH=<prefix>/<libdir>/pkgconfig;
#   - against the build tree: PKG_CONFIG_PATH=<build>/pkgconfig;
#   - with the build tag deft_intree (no pkg-config), when the build folder is
#     <checkout>/build, the one that tag links.
# Each binary must print the README's result and carry an rpath to the
# library it was built against (it runs without LD_LIBRARY_PATH).
# Run with -DGO=<go> -DSOURCE_DIR=<checkout> -DBUILD_DIR=<build> -DLIBDIR=<lib dir name>
#          -DWORK_DIR=<scratch folder>; offline (GOPROXY=off, GOFLAGS=-mod=mod from ctest).
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/hello)

include(${SOURCE_DIR}/cmake/user_project.cmake)
readme_block("// go.mod" gomod)
readme_block("// main.go" maingo)
string(REPLACE "/path/to/deft/bindings/go" "${SOURCE_DIR}/bindings/go" gomod "${gomod}")
file(WRITE ${WORK_DIR}/hello/go.mod "${gomod}")
file(WRITE ${WORK_DIR}/hello/main.go "${maingo}")

# build_and_run(<name> <library folder the rpath must name> go build args...)
# Each way has a build cache of its own: Go's does not key cgo packages on
# what pkg-config says, so a package built against one deft would be reused
# against another (the README says: go clean -cache after switching).
function(build_and_run name libdir)
    set(ENV{GOCACHE} ${WORK_DIR}/gocache-${name})
    execute_process(COMMAND ${GO} build -o ${WORK_DIR}/hello-${name} ${ARGN}
                    WORKING_DIRECTORY ${WORK_DIR}/hello RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${name}: go build failed (${rc}):\n${out}${err}")
    endif()
    execute_process(COMMAND readelf -d ${WORK_DIR}/hello-${name} OUTPUT_VARIABLE dyn)
    if(NOT dyn MATCHES "R(UN)?PATH[^\n]*${libdir}")
        message(FATAL_ERROR "${name}: no rpath to ${libdir}:\n${dyn}")
    endif()
    set(ENV{LD_LIBRARY_PATH} "")
    execute_process(COMMAND ${WORK_DIR}/hello-${name} RESULT_VARIABLE rc
                    OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0 OR NOT out STREQUAL "[0 2 3] <nil>\n")
        message(FATAL_ERROR "${name}: exit ${rc}, printed '${out}${err}', want '[0 2 3] <nil>'")
    endif()
    message(STATUS "${name}: go build and run: ${out}")
endfunction()

install_prefix(prefix)
set(ENV{PKG_CONFIG_PATH} ${prefix}/${LIBDIR}/pkgconfig)
build_and_run(installed ${prefix}/${LIBDIR})

set(ENV{PKG_CONFIG_PATH} ${BUILD_DIR}/pkgconfig)
build_and_run(build-tree ${BUILD_DIR})

build_is_in_tree(in_tree)
if(in_tree)
    set(ENV{PKG_CONFIG_PATH} /nonexistent)
    build_and_run(intree-tag ${SOURCE_DIR}/bindings/go/../../build -tags deft_intree)
else()
    message(STATUS "intree-tag: skipped, the build folder is not ${SOURCE_DIR}/build")
endif()
