# proto/: message encoding, decoding and validation (pure).
ty_add_test(proto unit/proto/test_proto.c unit)
target_link_libraries(test_proto PRIVATE ty_proto)
