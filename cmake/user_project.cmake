# Helpers of the tests that build a user's project outside the tree from the
# README's own files (bindings/go/user_module_test.cmake,
# bindings/rust/user_crate_test.cmake). Include with SOURCE_DIR, BUILD_DIR
# and WORK_DIR set.

# readme_block(<first line> <out var>): the fenced block of README.md whose first line is given
file(READ ${SOURCE_DIR}/README.md readme)
function(readme_block first out)
    string(FIND "${readme}" "${first}\n" start)
    if(start EQUAL -1)
        message(FATAL_ERROR "README.md has no block starting with '${first}'")
    endif()
    string(SUBSTRING "${readme}" ${start} -1 rest)
    string(FIND "${rest}" "\n```" stop)
    string(SUBSTRING "${rest}" 0 ${stop} text)
    set(${out} "${text}\n" PARENT_SCOPE)
endfunction()

# install_prefix(<out var>): `cmake --install` of the build into a scratch prefix
function(install_prefix out)
    set(prefix ${WORK_DIR}/prefix)
    execute_process(COMMAND ${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix}
                    RESULT_VARIABLE rc OUTPUT_QUIET ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "cmake --install failed: ${err}")
    endif()
    set(${out} ${prefix} PARENT_SCOPE)
endfunction()

# build_is_in_tree(<out var>): whether the build folder is <checkout>/build,
# the one the bindings' in-tree fallbacks link
function(build_is_in_tree out)
    get_filename_component(build_real ${BUILD_DIR} REALPATH)
    get_filename_component(intree_real ${SOURCE_DIR}/build REALPATH)
    if(build_real STREQUAL intree_real)
        set(${out} TRUE PARENT_SCOPE)
    else()
        set(${out} FALSE PARENT_SCOPE)
    endif()
endfunction()
