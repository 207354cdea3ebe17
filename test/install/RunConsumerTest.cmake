#===- test/install/RunConsumerTest.cmake - the install-consumer test -------===#
#
# cmake -P script run by ctest (test/install/CMakeLists.txt passes the -D
# variables read below). Steps, each fatal with its output on failure:
#   1. cmake --install <build> --prefix <work>/prefix (a fresh prefix);
#   2. the installed CMake files name no path of the source or build tree,
#      and every #include "runtime/..." of an installed header is installed;
#   3. configure and build consumer/ with CMAKE_PREFIX_PATH=<prefix> only,
#      the same compiler, generator and launcher (ccache) as this build;
#      its build runs the installed omnic (omni::omnic) on affine.mlir;
#   4. run the consumer on the step.bin it built and the installed omnirun
#      on the same file; both must print @f's exact result.
#
#===----------------------------------------------------------------------===#

foreach(var OMNI_SOURCE_DIR OMNI_BUILD_DIR WORK_DIR CONSUMER_SOURCE_DIR
            GENERATOR CXX_COMPILER)
  if(NOT ${var})
    message(FATAL_ERROR "install-consumer: -D${var}=... is required")
  endif()
endforeach()

function(run what)
  execute_process(COMMAND ${ARGN}
    RESULT_VARIABLE status OUTPUT_VARIABLE out ERROR_VARIABLE out)
  if(NOT status EQUAL 0)
    list(JOIN ARGN " " command)
    message(FATAL_ERROR "install-consumer: ${what} failed (${status}):\n"
      "${command}\n${out}")
  endif()
  set(output "${out}" PARENT_SCOPE)
endfunction()

function(expect_output what expected)
  string(FIND "${output}" "${expected}" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "install-consumer: ${what} did not print\n"
      "  ${expected}\nbut:\n${output}")
  endif()
endfunction()

set(prefix ${WORK_DIR}/prefix)
file(REMOVE_RECURSE ${WORK_DIR})

# 1. Install.
run("cmake --install" ${CMAKE_COMMAND} --install ${OMNI_BUILD_DIR}
    --prefix ${prefix})

# 2. The package is relocatable and its headers are complete.
file(GLOB_RECURSE cmake_files ${prefix}/*.cmake)
if(NOT cmake_files)
  message(FATAL_ERROR "install-consumer: no CMake files under ${prefix}")
endif()
foreach(file IN LISTS cmake_files)
  file(READ ${file} text)
  foreach(tree ${OMNI_SOURCE_DIR} ${OMNI_BUILD_DIR})
    string(FIND "${text}" "${tree}" at)
    if(NOT at EQUAL -1)
      message(FATAL_ERROR "install-consumer: ${file} names ${tree}, a path "
        "of the source or build tree")
    endif()
  endforeach()
endforeach()
file(GLOB_RECURSE headers RELATIVE ${prefix}/include ${prefix}/include/*.h)
list(LENGTH headers num_headers)
if(num_headers LESS 10)
  message(FATAL_ERROR "install-consumer: only ${num_headers} headers "
    "installed under ${prefix}/include")
endif()
foreach(header IN LISTS headers)
  file(STRINGS ${prefix}/include/${header} includes
       REGEX "^#include \"runtime/")
  foreach(line IN LISTS includes)
    string(REGEX REPLACE "^#include \"([^\"]+)\".*" "\\1" included "${line}")
    if(NOT EXISTS ${prefix}/include/${included})
      message(FATAL_ERROR "install-consumer: installed ${header} includes "
        "${included}, which is not installed")
    endif()
  endforeach()
endforeach()

# 3. Configure and build the consumer against the prefix alone.
set(launcher)
if(COMPILER_LAUNCHER)
  set(launcher -DCMAKE_CXX_COMPILER_LAUNCHER=${COMPILER_LAUNCHER})
endif()
set(make_program)
if(MAKE_PROGRAM)
  set(make_program -DCMAKE_MAKE_PROGRAM=${MAKE_PROGRAM})
endif()
run("configuring the consumer" ${CMAKE_COMMAND}
    -S ${CONSUMER_SOURCE_DIR} -B ${WORK_DIR}/build -G ${GENERATOR}
    ${make_program} ${launcher}
    -DCMAKE_CXX_COMPILER=${CXX_COMPILER}
    -DCMAKE_BUILD_TYPE=Release
    -DCMAKE_PREFIX_PATH=${prefix}
    -DCMAKE_FIND_USE_PACKAGE_REGISTRY=OFF)
expect_output("configuring the consumer"
  "consumer: omni 0.1 from ${prefix}/lib/cmake/omni")
run("building the consumer" ${CMAKE_COMMAND} --build ${WORK_DIR}/build)

# 4. Run it, and the installed omnirun, on the step.bin omnic built.
set(step ${WORK_DIR}/build/affine.bin)
run("the consumer" ${WORK_DIR}/build/consumer ${step})
expect_output("the consumer"
  "consumer: @f = tensor<2x2xf32>=[[5 23][17 47]] as expected")
run("the installed omnirun" ${prefix}/bin/omnirun ${step} --function=f
    --input=2x3xf32=1,2,3,4,5,6 --input=3x2xf32=1,0,2,1,-1,3)
expect_output("the installed omnirun"
  "result[0]: tensor<2x2xf32>=[[5 23][17 47]]")
message(STATUS "install-consumer: the installed omni package works")
