# fuzz/: each libFuzzer target of the clang build (build-fuzz, which
# tests/run builds) runs for TY_FUZZ_SECONDS over a temporary copy of its
# seed corpus, fuzz/corpus/<target>/ (fuzz/run). Label `fuzz`. Without the
# clang build the tests fail and say how to build it: they never skip.
# seconds each fuzz_* test fuzzes (-DTY_FUZZ_SECONDS=N for longer runs); all
# eight together must stay under 90 s of tests/run, loading the corpora included
if(NOT DEFINED TY_FUZZ_SECONDS)
  set(TY_FUZZ_SECONDS 6)
endif()
set(TY_FUZZ_BIN_DIR ${TY_SOURCE_DIR}/build-fuzz/bin CACHE PATH
    "where the clang build (-DTY_FUZZ=ON) put the fuzz_* programs")
file(GLOB TY_FUZZ_TARGETS CONFIGURE_DEPENDS ${TY_SOURCE_DIR}/fuzz/fuzz_*.c)
foreach(src ${TY_FUZZ_TARGETS})
  get_filename_component(name ${src} NAME_WE)
  string(REGEX REPLACE "^fuzz_" "" target ${name})
  if(TARGET ${name}) # this is the clang build itself
    set(bin $<TARGET_FILE:${name}>)
  else()
    set(bin ${TY_FUZZ_BIN_DIR}/${name})
  endif()
  add_test(NAME ${name} COMMAND bash ${TY_SOURCE_DIR}/fuzz/run ${bin} ${target} ${TY_FUZZ_SECONDS})
  set_tests_properties(${name} PROPERTIES LABELS fuzz TIMEOUT 120)
endforeach()
