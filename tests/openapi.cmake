# docs/openapi.json checked (tests/openapi/, whose node_modules tests/run
# installs): Redocly CLI's lint (openapi_lint, about 2 s), the matcher and
# validator's own cases (openapi_operations), and the API's
# responses on the e2e stack validated against it, every operation
# exercised (api_openapi).
add_test(NAME openapi_lint COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/openapi/lint.sh)
set_tests_properties(openapi_lint PROPERTIES LABELS unit TIMEOUT 60)
# the matcher and validator themselves (tests/openapi/operations.test.js)
add_test(NAME openapi_operations COMMAND node --test ${CMAKE_CURRENT_SOURCE_DIR}/openapi/operations.test.js)
set_tests_properties(openapi_operations PROPERTIES LABELS unit TIMEOUT 60)
add_test(NAME api_openapi COMMAND bash ${CMAKE_CURRENT_SOURCE_DIR}/openapi/api-test.sh)
set_tests_properties(api_openapi PROPERTIES LABELS e2e TIMEOUT 300
  ENVIRONMENT "${TY_E2E_ENV};TY_STACK_BIN=$<TARGET_FILE:ty_e2e_stack>")
