# The Python SDK (sdk/python): unit tests without an API, an install from its
# pyproject with Debian's pip (offline), and the client against the e2e stack.
set(TY_SDK_DIR ${PROJECT_SOURCE_DIR}/sdk/python)
add_test(NAME sdk_unit COMMAND /usr/bin/python3 ${TY_SDK_DIR}/tests/test_unit.py -v)
set_tests_properties(sdk_unit PROPERTIES LABELS unit TIMEOUT 120
  ENVIRONMENT "PYTHONPATH=${TY_SDK_DIR}/src;PYTHONDONTWRITEBYTECODE=1")
add_test(NAME sdk_install COMMAND bash ${TY_SDK_DIR}/tests/install_test.sh)
set_tests_properties(sdk_install PROPERTIES LABELS unit TIMEOUT 300)
add_test(NAME sdk COMMAND bash ${TY_SDK_DIR}/tests/e2e_test.sh)
set_tests_properties(sdk PROPERTIES LABELS e2e TIMEOUT 600
  ENVIRONMENT "${TY_E2E_ENV};TY_STACK_BIN=$<TARGET_FILE:ty_e2e_stack>;PYTHONDONTWRITEBYTECODE=1")
