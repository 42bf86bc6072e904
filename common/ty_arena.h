/* Bump allocator: many small allocations freed at once (one per request). */
#ifndef TY_ARENA_H
#define TY_ARENA_H

#include <stddef.h>

struct ty_arena; /* opaque */

/* Returns a new arena, or NULL when out of memory. */
struct ty_arena *ty_arena_new(void);
/* Frees the arena and everything allocated from it. NULL-safe. */
void ty_arena_free(struct ty_arena *a);
/* Memory owned by the arena, aligned for any type; NULL when out of memory. */
void *ty_arena_alloc(struct ty_arena *a, size_t n);
/* Copies of s / of n bytes of s, NUL-terminated, owned by the arena. */
char *ty_arena_strdup(struct ty_arena *a, const char *s);
char *ty_arena_strndup(struct ty_arena *a, const char *s, size_t n);
char *ty_arena_printf(struct ty_arena *a, const char *fmt, ...)
	__attribute__((format(printf, 2, 3)));
/* Bytes handed out so far (for limits and tests). */
size_t ty_arena_used(const struct ty_arena *a);

#endif
