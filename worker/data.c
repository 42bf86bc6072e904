/* The test pattern of trainyard-allreduce and its check (program and NCCL module). */
#include "allreduce.h"

size_t ar_dtype_size(enum ar_dtype t)
{
	return t == AR_DOUBLE ? sizeof(double) : sizeof(float);
}

const char *ar_dtype_name(enum ar_dtype t)
{
	return t == AR_DOUBLE ? "double" : "float";
}

/*
 * Rank r contributes (r + 1) * (1 + i % 3) + i % 4093: the sum over n ranks
 * is at most 3 n (n + 1) / 2 + 4092 n, below 2^24 for n <= 1024, so float
 * partial sums stay exact in any order. The pattern changes along the buffer
 * so a chunk sent to the wrong place is caught too.
 */
static double value(size_t i, int rank)
{
	return (double)(rank + 1) * (double)(1 + i % 3) + (double)(i % 4093);
}

void ar_fill(void *buf, enum ar_dtype t, size_t count, int rank, long long poison)
{
	for (size_t i = 0; i < count; i++) {
		double v = value(i, rank) + (poison >= 0 && (size_t)poison == i ? 1.0 : 0.0);

		if (t == AR_DOUBLE)
			((double *)buf)[i] = v;
		else
			((float *)buf)[i] = (float)v;
	}
}

double ar_expected(size_t i, int world)
{
	double n = world;

	return n * (n + 1) / 2 * (double)(1 + i % 3) + n * (double)(i % 4093);
}

long long ar_check(const void *buf, enum ar_dtype t, size_t count, int world, double *got)
{
	for (size_t i = 0; i < count; i++) {
		double v = t == AR_DOUBLE ? ((const double *)buf)[i] : ((const float *)buf)[i];

		if (v != ar_expected(i, world)) {
			*got = v;
			return (long long)i;
		}
	}
	return -1;
}
