/* Bump allocator over a chain of blocks; large requests get their own block. */
#include "ty_arena.h"

#include <stdarg.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define BLOCK_SIZE 8192
#define ALIGN 16

struct block {
	struct block *next;
	size_t used, cap;
	_Alignas(ALIGN) unsigned char mem[];
};

struct ty_arena {
	struct block *head;
	size_t total;
};

struct ty_arena *ty_arena_new(void)
{
	return calloc(1, sizeof(struct ty_arena));
}

void ty_arena_free(struct ty_arena *a)
{
	if (!a)
		return;
	for (struct block *b = a->head, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	free(a);
}

void *ty_arena_alloc(struct ty_arena *a, size_t n)
{
	struct block *b = a->head;
	size_t off;

	n = (n + ALIGN - 1) & ~(size_t)(ALIGN - 1);
	if (n == 0)
		n = ALIGN;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > BLOCK_SIZE / 2 ? n : BLOCK_SIZE;
		struct block *nb = malloc(sizeof(*nb) + cap);

		if (!nb)
			return NULL;
		nb->used = 0;
		nb->cap = cap;
		if (b && cap == n) {
			/* oversized: keep the current block in front for small ones */
			nb->next = b->next;
			b->next = nb;
		} else {
			nb->next = b;
			a->head = nb;
		}
		b = nb;
	}
	off = b->used;
	b->used += n;
	a->total += n;
	return b->mem + off;
}

char *ty_arena_strndup(struct ty_arena *a, const char *s, size_t n)
{
	char *p = ty_arena_alloc(a, n + 1);

	if (p) {
		memcpy(p, s, n);
		p[n] = '\0';
	}
	return p;
}

char *ty_arena_strdup(struct ty_arena *a, const char *s)
{
	return ty_arena_strndup(a, s, strlen(s));
}

char *ty_arena_printf(struct ty_arena *a, const char *fmt, ...)
{
	va_list ap;
	char *p;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(NULL, 0, fmt, ap);
	va_end(ap);
	if (n < 0 || !(p = ty_arena_alloc(a, (size_t)n + 1)))
		return NULL;
	va_start(ap, fmt);
	vsnprintf(p, (size_t)n + 1, fmt, ap);
	va_end(ap);
	return p;
}

size_t ty_arena_used(const struct ty_arena *a)
{
	return a->total;
}
