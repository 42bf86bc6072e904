/* Clocks and timestamps. */
#ifndef TY_TIME_H
#define TY_TIME_H

#include <stdbool.h>
#include <stdint.h>

/* Monotonic milliseconds, for timeouts and durations. */
int64_t ty_mono_ms(void);
/* Wall-clock milliseconds since the epoch. */
int64_t ty_wall_ms(void);

/*
 * Epoch milliseconds of a UTC calendar time (proleptic Gregorian; years
 * 1970-9999, seconds 0-60, frac_ms 0-999), or false when it is not a valid
 * date and time. A leap second (60) counts as the end of its minute.
 */
bool ty_time_civil_ms(int64_t *ms, int year, int month, int day, int hour, int min, int sec,
		      int frac_ms);
/*
 * An RFC 3339 date-time ("2026-11-22T15:30:00Z", "...T15:30:00.25+01:00";
 * 't'/'z' accepted, 1-9 fraction digits, kept to the millisecond) as epoch
 * milliseconds, or false.
 */
bool ty_time_parse_rfc3339(int64_t *ms, const char *s);

#endif
