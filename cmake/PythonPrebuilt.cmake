# The Python package around a library built before: `pip install .` with
# -C cmake.define.DEFT_PYTHON_PREBUILT=<a build folder of this source tree>
# (scripts/setup.sh's deft_python_env, with build/) installs that build's
# libdeft and `_deft` module instead of compiling both again. The scripts'
# Python suites then run the very library the C suites ran, and a second full
# build (ten minutes of a two-core CI run, CUDA included) is not made.
# A plain `pip install .` still builds everything from source.
set(prebuilt "${DEFT_PYTHON_PREBUILT}")
# Given each time, never remembered: a later plain build in this folder compiles.
unset(DEFT_PYTHON_PREBUILT CACHE)
set(library "${prebuilt}/libdeft.so.${PROJECT_VERSION}")
set(module "${prebuilt}/bindings/python/deft/_deft.so")
set(soabi "${prebuilt}/bindings/python/deft/soabi.txt")
foreach(file IN ITEMS "${library}" "${module}" "${soabi}")
    if(NOT EXISTS "${file}")
        message(FATAL_ERROR "DEFT_PYTHON_PREBUILT is '${prebuilt}', which has no ${file}: "
                            "build it first (cmake --build ${prebuilt}), with the Python binding on")
    endif()
endforeach()
# The module was built for the interpreter that build found; pip's may differ.
file(STRINGS "${soabi}" built_for LIMIT_COUNT 1)
find_package(Python3 COMPONENTS Interpreter Development.Module REQUIRED)
if(NOT built_for STREQUAL Python3_SOABI)
    message(FATAL_ERROR "DEFT_PYTHON_PREBUILT: ${module} was built for Python '${built_for}', "
                        "but pip runs ${Python3_EXECUTABLE} ('${Python3_SOABI}')")
endif()

# As a wheel built from source lays them out (bindings/python/CMakeLists.txt): side by
# side, _deft finding libdeft through its $ORIGIN run path, not the build folder's.
install(FILES "${library}" DESTINATION . RENAME "libdeft.so.${PROJECT_VERSION_MAJOR}")
install(FILES "${module}" DESTINATION .)
install(CODE "file(RPATH_SET FILE \"\$ENV{DESTDIR}\${CMAKE_INSTALL_PREFIX}/_deft.so\" NEW_RPATH \"\$ORIGIN\")")
