/*
 * The goodput categories (docs/scheduling.md, "Goodput"): every GPU-second
 * of an attempt is in exactly one. The scheduler writes them to the usage
 * ledger (column <name>_gpu_ms), the API sums them (GET /v1/usage?split=goodput,
 * member <name>_gpu_hours), jobctl shows them in this order.
 */
#ifndef TY_PROTO_GOODPUT_H
#define TY_PROTO_GOODPUT_H

/* name, string */
#define PROTO_GOODPUT_CATEGORIES(X)                                           \
	X(USEFUL, "useful")                                                   \
	X(CHECKPOINT, "checkpoint")                                           \
	X(IDLE, "idle")                                                       \
	X(LOST_PREEMPTION, "lost_preemption")                                 \
	X(LOST_USER, "lost_user")                                             \
	X(LOST_INFRA, "lost_infra")                                           \
	X(HANG, "hang")                                                       \
	X(STRAGGLER, "straggler")

enum proto_goodput {
#define PROTO_GOODPUT_ENUM(name, str) PROTO_GOODPUT_##name,
	PROTO_GOODPUT_CATEGORIES(PROTO_GOODPUT_ENUM)
#undef PROTO_GOODPUT_ENUM
	PROTO_GOODPUT_COUNT
};

#endif
