/* Clocks and calendar times. */
#include "ty_time.h"

#include <ctype.h>
#include <string.h>
#include <time.h>

int64_t ty_mono_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int64_t ty_wall_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_REALTIME, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Days since 1970-01-01 of a proleptic Gregorian date (H. Hinnant's algorithm). */
static int64_t days_from_civil(int64_t y, int m, int d)
{
	int64_t era, yoe, doy, doe;

	y -= m <= 2;
	era = (y >= 0 ? y : y - 399) / 400;
	yoe = y - era * 400;
	doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
	doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
	return era * 146097 + doe - 719468;
}

bool ty_time_civil_ms(int64_t *ms, int y, int mo, int d, int h, int mi, int s, int frac_ms)
{
	static const int mdays[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
	bool leap = (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;

	if (y < 1970 || y > 9999 || mo < 1 || mo > 12 || d < 1 || d > mdays[mo - 1] + (mo == 2 && leap) ||
	    h < 0 || h > 23 || mi < 0 || mi > 59 || s < 0 || s > 60 || frac_ms < 0 || frac_ms > 999)
		return false;
	if (s == 60) /* a leap second is the end of its minute */
		s = 59, frac_ms = 999;
	*ms = ((days_from_civil(y, mo, d) * 24 + h) * 60 + mi) * 60000 + (int64_t)s * 1000 + frac_ms;
	return true;
}

/* n decimal digits at s, or -1. */
static int digits(const char *s, int n)
{
	int v = 0;

	for (int i = 0; i < n; i++) {
		if (!isdigit((unsigned char)s[i]))
			return -1;
		v = v * 10 + (s[i] - '0');
	}
	return v;
}

bool ty_time_parse_rfc3339(int64_t *ms, const char *s)
{
	int frac_ms = 0, off = 0;
	const char *p;
	int64_t t;

	if (!s || strlen(s) < 20 || s[4] != '-' || s[7] != '-' || (s[10] != 'T' && s[10] != 't') ||
	    s[13] != ':' || s[16] != ':')
		return false;
	p = s + 19;
	if (*p == '.') {
		int n = 0;

		for (p++; isdigit((unsigned char)*p); p++, n++)
			if (n < 3)
				frac_ms = frac_ms * 10 + (*p - '0');
		if (n == 0 || n > 9)
			return false;
		for (; n < 3; n++)
			frac_ms *= 10;
	}
	if ((*p == 'Z' || *p == 'z') && !p[1]) {
		off = 0;
	} else if ((*p == '+' || *p == '-') && strlen(p) == 6 && p[3] == ':') {
		int oh = digits(p + 1, 2), om = digits(p + 4, 2);

		if (oh < 0 || oh > 23 || om < 0 || om > 59)
			return false;
		off = (oh * 60 + om) * (*p == '-' ? -1 : 1);
	} else {
		return false;
	}
	if (!ty_time_civil_ms(&t, digits(s, 4), digits(s + 5, 2), digits(s + 8, 2),
			      digits(s + 11, 2), digits(s + 14, 2), digits(s + 17, 2), frac_ms))
		return false;
	*ms = t - (int64_t)off * 60000;
	return true;
}
