/* Clocks and timestamps. */
#ifndef TY_TIME_H
#define TY_TIME_H

#include <stdint.h>

/* Monotonic milliseconds, for timeouts and durations. */
int64_t ty_mono_ms(void);
/* Wall-clock milliseconds since the epoch. */
int64_t ty_wall_ms(void);

#endif
