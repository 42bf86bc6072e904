# worker/: the reference all-reduce worker as real processes on loopback
# "nodes", its node check's pure parts, and the PyTorch DDP example (needs
# /usr/bin/python3 with torch).

ty_add_test(worker_nodecheck_unit unit/worker/test_nodecheck.c unit)
target_sources(test_worker_nodecheck_unit PRIVATE ${TY_SOURCE_DIR}/worker/nodecheck.c)
target_include_directories(test_worker_nodecheck_unit PRIVATE ${TY_SOURCE_DIR}/worker)

add_test(NAME worker_allreduce COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/allreduce_test.sh)
set_tests_properties(worker_allreduce PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>;TY_HAVE_NCCL=${TY_HAVE_NCCL}")

add_test(NAME worker_ddp COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/ddp_test.sh)
set_tests_properties(worker_ddp PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_WORKER_EXAMPLES=${TY_SOURCE_DIR}/worker/examples")

add_test(NAME worker_nodecheck COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nodecheck_test.sh)
set_tests_properties(worker_nodecheck PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>")

# a real slow link: network namespaces, a bridge and tc tbf (root, like e2e_netns)
add_test(NAME worker_nodecheck_netns COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nodecheck_netns.sh)
set_tests_properties(worker_nodecheck_netns PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
  "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>")

# the trial metrics client (standard library only) against a scripted local HTTP server
add_test(NAME worker_metrics_client COMMAND /usr/bin/python3
  ${CMAKE_CURRENT_SOURCE_DIR}/worker/metrics_client_test.py)
set_tests_properties(worker_metrics_client PROPERTIES LABELS unit TIMEOUT 120 ENVIRONMENT
  "TY_WORKER_EXAMPLES=${TY_SOURCE_DIR}/worker/examples")

# the NCCL module against a stand-in for libnccl and libcudart (no GPU here):
# its timeout, abort on a peer's error and device mapping; and the node check
# with the NCCL backend. Installed under the
# sonames the module needs, in a directory the test puts on LD_LIBRARY_PATH.
if(TY_HAVE_NCCL)
  get_filename_component(ty_cudart_real ${TY_CUDART_LIB} REALPATH)
  string(REGEX MATCH "libcudart\\.so\\.[0-9]+" ty_cudart_soname ${ty_cudart_real})
  set(ty_fake_gpu_dir ${CMAKE_BINARY_DIR}/fake-gpu)
  add_library(fake_nccl SHARED ${CMAKE_CURRENT_SOURCE_DIR}/worker/fake_nccl.c)
  target_include_directories(fake_nccl SYSTEM PRIVATE ${TY_NCCL_INCLUDE} ${TY_CUDART_INCLUDE})
  set_target_properties(fake_nccl PROPERTIES OUTPUT_NAME nccl SOVERSION 2
                        LIBRARY_OUTPUT_DIRECTORY ${ty_fake_gpu_dir})
  add_custom_command(TARGET fake_nccl POST_BUILD
    COMMAND ${CMAKE_COMMAND} -E copy $<TARGET_FILE:fake_nccl> ${ty_fake_gpu_dir}/${ty_cudart_soname}
    VERBATIM)
  add_test(NAME worker_nccl_module COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nccl_module_test.sh)
  set_tests_properties(worker_nccl_module PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
    "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>;TY_FAKE_GPU_DIR=${ty_fake_gpu_dir}")
  add_dependencies(fake_nccl trainyard-allreduce)
  # the node check with the NCCL backend: pairs measured by NCCL, a slow node
  # named, the gang's all-reduce against its fabric's floor
  add_test(NAME worker_nccl_nodecheck COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/worker/nccl_nodecheck_test.sh)
  set_tests_properties(worker_nccl_nodecheck PROPERTIES LABELS integration TIMEOUT 300 ENVIRONMENT
    "TY_ALLREDUCE_BIN=$<TARGET_FILE:trainyard-allreduce>;TY_FAKE_GPU_DIR=${ty_fake_gpu_dir}")
endif()
