#===- MKCompiler.cmake - how compiler components plug in -------------------===#
#
# Included once, from dialects/CMakeLists.txt, before any dialect or compiler
# component is configured. A component (a dialect, a pass library, an emitter)
# announces itself with ONE call in its own CMakeLists.txt:
#
#   mk_add_compiler_component(MKScheduleTransforms
#     DIALECT_HOOKS mk::schedule::registerScheduleDialect
#     PASS_HOOKS    mk::schedule::registerScheduleTransformsPasses
#     STAGE_HOOKS   mk::schedule::registerSchedulePipelineStages)
#
# which links the library into `MKCompilerPasses` (what mkc, mk-opt and the
# compiler gtests link) and makes the generated mk::registerAllDialects /
# registerAllPasses / registerAllPipelineStages (compiler/Pipeline/InitAll.h)
# call the hooks, in configuration order. Hook signatures (fully qualified
# names, any namespace):
#   DIALECT_HOOKS: void hook(mlir::DialectRegistry &registry);
#   PASS_HOOKS:    void hook();   // e.g. the ODS-generated register<X>Passes()
#   STAGE_HOOKS:   void hook();   // calls mk::registerPipelineStage(...)
#
# MLIR headers are compiled without RTTI (as libMLIR*.a were); every MLIR-using
# target should go through mk_mlir_target_flags(<target>).
#
#===----------------------------------------------------------------------===#

# Position-independent code in every directory that includes this (the
# dialects and the compiler): libmk_jit_c.so links them into a shared object.
set(CMAKE_POSITION_INDEPENDENT_CODE ON)

include_guard(GLOBAL)

set(MK_SKIP_COMPONENTS "" CACHE STRING
    "Dialect or compiler component directories to leave out of the build (e.g. Schedule;Transforms while they are being written)")

# True if directory `name` of dialects/ or compiler/ should be configured.
function(mk_component_enabled dir name out_var)
  set(ok FALSE)
  if(IS_DIRECTORY ${dir}/${name} AND EXISTS ${dir}/${name}/CMakeLists.txt)
    set(ok TRUE)
  endif()
  if(name IN_LIST MK_SKIP_COMPONENTS)
    set(ok FALSE)
  endif()
  set(${out_var} ${ok} PARENT_SCOPE)
endfunction()

if(NOT TARGET MKCompilerPasses)
  add_library(MKCompilerPasses INTERFACE)
endif()

set_property(GLOBAL PROPERTY MK_DIALECT_HOOKS "")
set_property(GLOBAL PROPERTY MK_PASS_HOOKS "")
set_property(GLOBAL PROPERTY MK_STAGE_HOOKS "")

find_program(MK_LLD ld.lld)

function(mk_mlir_target_flags target)
  target_compile_options(${target} PRIVATE
    $<$<COMPILE_LANGUAGE:CXX>:-fno-rtti>)
  # Static MLIR links are large; lld links them several times faster.
  get_target_property(type ${target} TYPE)
  if(MK_LLD AND type STREQUAL "EXECUTABLE")
    target_link_options(${target} PRIVATE -fuse-ld=lld)
  endif()
endfunction()

function(mk_add_compiler_component library)
  cmake_parse_arguments(ARG "" "" "DIALECT_HOOKS;PASS_HOOKS;STAGE_HOOKS" ${ARGN})
  target_link_libraries(MKCompilerPasses INTERFACE ${library})
  foreach(kind DIALECT PASS STAGE)
    foreach(hook ${ARG_${kind}_HOOKS})
      set_property(GLOBAL APPEND PROPERTY MK_${kind}_HOOKS "${hook}")
    endforeach()
  endforeach()
endfunction()

# Writes a C++ forward declaration of the fully qualified function `hook`
# with parameter list `params` into `out_var`.
function(_mk_declare_hook hook params out_var)
  string(REPLACE "::" ";" parts "${hook}")
  list(POP_BACK parts fn)
  set(decl "void ${fn}(${params});")
  list(REVERSE parts)
  foreach(ns ${parts})
    if(NOT ns STREQUAL "")
      set(decl "namespace ${ns} { ${decl} }")
    endif()
  endforeach()
  set(${out_var} "${decl}" PARENT_SCOPE)
endfunction()

# Generates the registration translation unit from every component announced
# so far. Called once, by compiler/CMakeLists.txt, after all components.
function(mk_generate_registration out_file)
  get_property(dialects GLOBAL PROPERTY MK_DIALECT_HOOKS)
  get_property(passes GLOBAL PROPERTY MK_PASS_HOOKS)
  get_property(stages GLOBAL PROPERTY MK_STAGE_HOOKS)
  set(decls "")
  set(dialect_calls "")
  set(pass_calls "")
  set(stage_calls "")
  foreach(h ${dialects})
    _mk_declare_hook(${h} "::mlir::DialectRegistry &" d)
    string(APPEND decls "${d}\n")
    string(APPEND dialect_calls "  ${h}(registry);\n")
  endforeach()
  foreach(h ${passes})
    _mk_declare_hook(${h} "" d)
    string(APPEND decls "${d}\n")
    string(APPEND pass_calls "  ${h}();\n")
  endforeach()
  foreach(h ${stages})
    _mk_declare_hook(${h} "" d)
    string(APPEND decls "${d}\n")
    string(APPEND stage_calls "  ${h}();\n")
  endforeach()
  set(MK_HOOK_DECLS "${decls}")
  set(MK_DIALECT_CALLS "${dialect_calls}")
  set(MK_PASS_CALLS "${pass_calls}")
  set(MK_STAGE_CALLS "${stage_calls}")
  configure_file(${MK_SOURCE_DIR}/compiler/Pipeline/InitAll.cpp.in ${out_file} @ONLY)
endfunction()
