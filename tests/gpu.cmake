# tests/gpu/: checks for a machine with a real GPU, run by tests/gpu/run (no
# ctest test: without a GPU they have nothing to check). The job test is
# built here too, so that the sanitizer build keeps it compiling.
add_executable(test_gpu_job gpu/test_gpu_job.c)
target_link_libraries(test_gpu_job PRIVATE ty_test_harness)
