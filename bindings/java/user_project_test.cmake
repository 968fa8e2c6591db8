# A user's Maven project outside the tree, as the README's Java section shows
# it (its pom.xml and Main.java are read from README.md, so the two agree):
# it depends on org.deft:deft:0.1.0 alone. deft's jar is installed the way
# java_install does it (mvn -o install), into a scratch local repository
# that lends everything else from MAVEN_REPO (Debian's) through links, so the
# test writes nothing there. The project is built with `mvn -o package` and
# run with plain `java -cp`, no library path and an empty LD_LIBRARY_PATH:
# it must print the README's result, and libdeft must be loaded from the
# folder the jar's libraries were extracted to (the loader's trace says).
# Then the same with -Ddeft.library.path, the fallback for in-tree use,
# which must load libdeftjni from the folder it names.
# Run with -DMVN=<mvn> -DJAVA=<java> -DSOURCE_DIR=<checkout>
#          -DNATIVE_DIR=<build>/bindings/java/native -DMAVEN_REPO=<repo>
#          -DWORK_DIR=<scratch folder>
cmake_minimum_required(VERSION 3.18) # policies: quoted if() arguments are strings
file(REMOVE_RECURSE ${WORK_DIR})
file(MAKE_DIRECTORY ${WORK_DIR}/repo/org ${WORK_DIR}/hello/src/main/java)

# the scratch repository: links to MAVEN_REPO's entries, org/ one level down
# (org/deft is installed into it)
file(GLOB top RELATIVE ${MAVEN_REPO} ${MAVEN_REPO}/*)
file(GLOB org RELATIVE ${MAVEN_REPO}/org ${MAVEN_REPO}/org/*)
foreach(entry ${top})
    if(NOT entry STREQUAL "org")
        file(CREATE_LINK ${MAVEN_REPO}/${entry} ${WORK_DIR}/repo/${entry} SYMBOLIC)
    endif()
endforeach()
foreach(entry ${org})
    if(NOT entry STREQUAL "deft")
        file(CREATE_LINK ${MAVEN_REPO}/org/${entry} ${WORK_DIR}/repo/org/${entry} SYMBOLIC)
    endif()
endforeach()

function(run what)
    execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
    if(NOT rc EQUAL 0)
        message(FATAL_ERROR "${what} failed (${rc}):\n${out}${err}")
    endif()
endfunction()

set(repo -Dmaven.repo.local=${WORK_DIR}/repo)
run("mvn -o install of deft" ${CMAKE_COMMAND} -E chdir ${SOURCE_DIR}/bindings/java
    ${MVN} -o -q ${repo} -Ddeft.native.dir=${NATIVE_DIR}
    -Ddeft.target.dir=${WORK_DIR}/deft-target -DskipTests install)
set(jar ${WORK_DIR}/repo/org/deft/deft/0.1.0/deft-0.1.0.jar)
if(NOT EXISTS ${jar})
    message(FATAL_ERROR "mvn install did not put ${jar} in the local repository")
endif()

include(${SOURCE_DIR}/cmake/user_project.cmake)
readme_block("<!-- pom.xml -->" pom)
readme_block("// src/main/java/Main.java" main)
file(WRITE ${WORK_DIR}/hello/pom.xml "${pom}")
file(WRITE ${WORK_DIR}/hello/src/main/java/Main.java "${main}")
run("mvn -o package of the user project" ${CMAKE_COMMAND} -E chdir ${WORK_DIR}/hello
    ${MVN} -o -q ${repo} package)

# run_main(<name> <regex the loader's trace must match> [java options...])
function(run_main name loaded)
    set(ENV{LD_LIBRARY_PATH} "")
    set(ENV{LD_DEBUG} libs)
    execute_process(COMMAND ${JAVA} ${ARGN} -cp ${WORK_DIR}/hello/target/hello-1.0.jar:${jar} Main
                    RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE trace)
    unset(ENV{LD_DEBUG})
    if(NOT rc EQUAL 0 OR NOT out STREQUAL "[0.0, 2.0, 3.0]\n")
        message(FATAL_ERROR "${name}: exit ${rc}, printed '${out}', want '[0.0, 2.0, 3.0]'\n${trace}")
    endif()
    if(NOT trace MATCHES "${loaded}")
        message(FATAL_ERROR "${name}: the loader's trace has no '${loaded}':\n${trace}")
    endif()
    message(STATUS "${name}: ${out}")
endfunction()

# from the jar: libdeft from the folder the jar's copies were extracted to
run_main("java -cp" "init: [^\n]*/deft-native-[^/\n]*/libdeft\\.so")
# -Ddeft.library.path names a folder: libdeftjni from there, not from the jar
get_filename_component(native_real ${NATIVE_DIR} REALPATH)
run_main("java -Ddeft.library.path" "init: ${native_real}/libdeftjni\\.so"
         -Ddeft.library.path=${NATIVE_DIR})
