/*
 * What the libFuzzer targets share. Each fuzz_<name>.c defines
 * LLVMFuzzerTestOneInput (and may define LLVMFuzzerInitialize); a broken
 * invariant is a crash, reported with FUZZ_CHECK's message.
 */
#ifndef TY_FUZZ_H
#define TY_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/* Abort (a libFuzzer crash) with file, line and the condition when cond is false. */
#define FUZZ_CHECK(cond)                                                                   \
	do {                                                                               \
		if (!(cond)) {                                                             \
			fprintf(stderr, "%s:%d: invariant broken: %s\n", __FILE__, __LINE__, \
				#cond);                                                    \
			abort();                                                           \
		}                                                                          \
	} while (0)

/* A NUL-terminated copy of the input (malloc'd; NULL on ENOMEM). */
static inline char *fuzz_cstr(const uint8_t *data, size_t size)
{
	char *s = malloc(size + 1);

	if (s) {
		memcpy(s, data, size);
		s[size] = '\0';
	}
	return s;
}

#endif
