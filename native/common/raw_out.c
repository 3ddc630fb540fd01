#define _GNU_SOURCE
#include "raw_out.h"

#include <errno.h>
#include <stdarg.h>
#include <string.h>

static int fail(struct raw_out *o)
{
	if (!o->err)
		o->err = errno ? errno : EIO;
	return -1;
}

int raw_open(struct raw_out *o, const char *path)
{
	o->err = 0;
	o->name = path ? path : "standard output";
	o->f = path ? fopen(path, "w") : stdout;
	return o->f ? 0 : fail(o);
}

int raw_printf(struct raw_out *o, const char *fmt, ...)
{
	va_list ap;
	int n;

	if (o->err)
		return -1;
	va_start(ap, fmt);
	n = vfprintf(o->f, fmt, ap);
	va_end(ap);
	return n < 0 ? fail(o) : 0;
}

int raw_json_string(struct raw_out *o, const char *s)
{
	raw_printf(o, "\"");
	for (; *s; s++) {
		unsigned char ch = (unsigned char)*s;

		if (ch == '"' || ch == '\\')
			raw_printf(o, "\\%c", ch);
		else if (ch < 0x20)
			raw_printf(o, "\\u%04x", ch);
		else
			raw_printf(o, "%c", ch);
	}
	return raw_printf(o, "\"");
}

int raw_flush(struct raw_out *o)
{
	if (o->err)
		return -1;
	return fflush(o->f) != 0 ? fail(o) : 0;
}

int raw_close(struct raw_out *o, const char *prog)
{
	int rc = raw_flush(o);

	if (o->f && o->f != stdout && fclose(o->f) != 0 && rc == 0)
		rc = fail(o);
	o->f = NULL;
	if (rc != 0)
		fprintf(stderr, "%s: writing %s: %s\n", prog, o->name, strerror(o->err));
	return rc;
}
