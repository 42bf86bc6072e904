# executor/: unit tests of its pure parts, and one integration test that runs
# a real trainyard-executor against the broker (TY_TEST_KAFKA_BOOTSTRAP).

foreach(m launch labels dedupe state tail proc progress ckpt spot classify hw_gpu hw_nvml hw_hca hw_nccl
          hw_json hw_capacity runtime health health_watch health_check)
  ty_add_test(executor_${m} unit/executor/test_${m}.c unit)
  target_link_libraries(test_executor_${m} PRIVATE ty_exec)
endforeach()
# checkpoints written by the Python helper of worker/examples must verify
target_compile_definitions(test_executor_ckpt PRIVATE
  TY_WORKER_EXAMPLES_DIR="${TY_SOURCE_DIR}/worker/examples")

# a fake CUDA runtime the GPU probe loads by path (tests/unit/executor/fake_cudart.c)
add_library(fake_cudart SHARED unit/executor/fake_cudart.c)
add_library(fake_cudart_v1 SHARED unit/executor/fake_cudart.c)
target_compile_definitions(fake_cudart_v1 PRIVATE FAKE_CUDART_V1)
add_library(fake_cudart_no_busid SHARED unit/executor/fake_cudart.c)
target_compile_definitions(fake_cudart_no_busid PRIVATE FAKE_CUDART_NO_BUSID)
# a stand-in for libnvidia-ml.so.1 driven by a JSON control file (tests/unit/executor/fake_nvml.c)
add_library(fake_nvml SHARED unit/executor/fake_nvml.c)
target_link_libraries(fake_nvml PRIVATE PkgConfig::JANSSON Threads::Threads)
# GPU telemetry: the summaries, the sampler and --sample-for against the stand-in
ty_add_test(executor_telemetry unit/executor/test_telemetry.c unit)
target_link_libraries(test_executor_telemetry PRIVATE ty_exec)
foreach(t hw_gpu hw_nvml hw_hca health_watch telemetry)
  add_dependencies(test_executor_${t} fake_cudart fake_cudart_v1 fake_cudart_no_busid fake_nvml)
  set_tests_properties(executor_${t} PROPERTIES ENVIRONMENT
    "TY_FAKE_CUDART=$<TARGET_FILE:fake_cudart>;TY_FAKE_CUDART_V1=$<TARGET_FILE:fake_cudart_v1>;TY_FAKE_CUDART_NO_BUSID=$<TARGET_FILE:fake_cudart_no_busid>;TY_FAKE_NVML=$<TARGET_FILE:fake_nvml>")
endforeach()

ty_add_test(executor integration/executor/test_executor.c integration)
target_link_libraries(test_executor PRIVATE ty_proto PkgConfig::CURL PkgConfig::RDKAFKA)
add_dependencies(test_executor trainyard-executor fake_nvml)
set(TY_EXECUTOR_TEST_ENV ${TY_INTEGRATION_ENV} "TY_EXECUTOR_BIN=$<TARGET_FILE:trainyard-executor>")
# the telemetry cases take their GPUs from the NVML stand-in (--nvml-library)
add_dependencies(test_executor fake_nvml)
set_tests_properties(executor PROPERTIES ENVIRONMENT
  "${TY_EXECUTOR_TEST_ENV};TY_FAKE_NVML=$<TARGET_FILE:fake_nvml>;TY_S3_GATE=${TY_SOURCE_DIR}/tests/s3/sigv4-gate.js" TIMEOUT 240)
# the tiering cases alone (they run in executor too): s3rver behind the SigV4
# gate of tests/s3, which tests/run installs
add_test(NAME executor_tier COMMAND test_executor
  tiering_moves_old_checkpoints_and_a_resume_restores_one
  tiering_refused_or_down_keeps_local_copies_reports_and_retries
  tiering_store_refuses_unsigned_and_badly_signed_requests
  tiering_restores_the_named_checkpoint_or_fails_the_attempt)
set_tests_properties(executor_tier PROPERTIES LABELS integration TIMEOUT 120 ENVIRONMENT
  "${TY_EXECUTOR_TEST_ENV};TY_S3_GATE=${TY_SOURCE_DIR}/tests/s3/sigv4-gate.js")

ty_add_test(executor_spot_poller integration/executor/test_spot.c integration)
target_link_libraries(test_executor_spot_poller PRIVATE ty_proto PkgConfig::RDKAFKA PkgConfig::MHD)
add_dependencies(test_executor_spot_poller trainyard-executor)
set_tests_properties(executor_spot_poller PROPERTIES ENVIRONMENT "${TY_EXECUTOR_TEST_ENV}" TIMEOUT 180)
