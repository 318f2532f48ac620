# ctest Install.Consumer: installs the runtime component of BUILD_DIR (and,
# with -DJIT=1, the jit component) into a fresh prefix, configures and builds
# examples/consumer against it with find_package(megakernel), and runs the
# consumer on a manifest mkc writes (if MKC is given) and, with JIT, on a
# spec it compiles in process. With -DSANITIZE= (a sanitizer build) the
# consumer links the sanitizers' runtime.
foreach(v BUILD_DIR SOURCE_DIR WORK_DIR)
  if(NOT DEFINED ${v})
    message(FATAL_ERROR "ConsumerTest.cmake needs -D${v}=")
  endif()
endforeach()
file(REMOVE_RECURSE ${WORK_DIR})
set(prefix ${WORK_DIR}/prefix)
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "failed (${rc}): ${ARGN}")
  endif()
endfunction()
run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component runtime)
# The JIT where the build has it (JIT=1): megakernel::jit too.
if(JIT)
  run(${CMAKE_COMMAND} --install ${BUILD_DIR} --prefix ${prefix} --component jit)
endif()
if(NOT EXISTS ${prefix}/lib/cmake/megakernel/megakernelConfig.cmake AND
   NOT EXISTS ${prefix}/lib64/cmake/megakernel/megakernelConfig.cmake)
  message(FATAL_ERROR "no megakernelConfig.cmake under ${prefix}")
endif()
# SANITIZE (a -fsanitize= list): the build's libraries are instrumented, so
# the consumer links the sanitizers' runtime.
set(link_flags "")
if(SANITIZE)
  set(link_flags "-DCMAKE_EXE_LINKER_FLAGS=-fsanitize=${SANITIZE}")
endif()
run(${CMAKE_COMMAND} -S ${SOURCE_DIR}/examples/consumer -B ${WORK_DIR}/build
    -DCMAKE_PREFIX_PATH=${prefix} -DCMAKE_BUILD_TYPE=Release ${link_flags})
run(${CMAKE_COMMAND} --build ${WORK_DIR}/build)
if(JIT)
  run(${WORK_DIR}/build/mk-consumer --compile ${SOURCE_DIR}/examples/specs/tiny.json
      ${WORK_DIR}/tiny-jit)
endif()
if(DEFINED MKC AND EXISTS "${MKC}")
  run(${MKC} ${SOURCE_DIR}/examples/specs/tiny.json --emit=cuda -o ${WORK_DIR}/tiny)
  run(${WORK_DIR}/build/mk-consumer ${WORK_DIR}/tiny/mk_tiny.manifest.json)
else()
  run(${WORK_DIR}/build/mk-consumer)
endif()
