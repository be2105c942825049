/* Error records and names. */
#include "util.h"

#include <stdio.h>
#include <string.h>

int corral_set_error(struct corral_error *err, int code, int sys_errno, const char *step,
                     const char *fmt, ...)
{
	if (!err)
		return code;
	err->code = code;
	err->sys_errno = sys_errno;
	snprintf(err->step, sizeof(err->step), "%s", step ? step : "");
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->message, sizeof(err->message), fmt, ap);
	va_end(ap);
	return code;
}

const char *corral_strerror(int code)
{
	switch (code) {
	case CORRAL_OK:
		return "success";
	case CORRAL_EINVAL:
		return "invalid argument";
	case CORRAL_ENOMEM:
		return "out of memory";
	case CORRAL_ESYS:
		return "system call failed";
	case CORRAL_ESETUP:
		return "sandbox setup failed";
	case CORRAL_EUNAVAIL:
		return "isolation layer unavailable";
	case CORRAL_ENOTFOUND:
		return "command not found";
	case CORRAL_ENOEXEC:
		return "command not executable";
	case CORRAL_EDENIED:
		return "denied by policy";
	case CORRAL_ESTATE:
		return "invalid state for this call";
	case CORRAL_EAGAIN:
		return "resource temporarily unavailable";
	}
	return "unknown error";
}
