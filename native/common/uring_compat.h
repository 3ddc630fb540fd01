/* io_uring ABI constants newer than the installed liburing's headers.
 *
 * Debian 12 ships liburing 2.3, whose io_uring.h predates some kernel ABI
 * that a 6.x kernel accepts. Each value below is the kernel's UAPI value
 * (include/uapi/linux/io_uring.h) and is defined only where the installed
 * header lacks it, so a newer liburing's definitions win. Whether the
 * running kernel accepts a feature is probed at run time, never assumed
 * from these definitions. tests/test_native.py checks the values against
 * the kernel's UAPI header when one is installed.
 */
#ifndef IOLAB_URING_COMPAT_H
#define IOLAB_URING_COMPAT_H

#include <liburing.h>

/* SEND_ZC: report in the notification whether the kernel had to copy
 * (Linux 6.2). Set in sqe->ioprio; the notification's res then carries
 * IORING_NOTIF_USAGE_ZC_COPIED if any byte was copied. */
#ifndef IORING_SEND_ZC_REPORT_USAGE
#define IORING_SEND_ZC_REPORT_USAGE (1U << 3)
#endif
#ifndef IORING_NOTIF_USAGE_ZC_COPIED
#define IORING_NOTIF_USAGE_ZC_COPIED (1U << 31)
#endif

/* Batched waits (Linux 6.12): IORING_ENTER_EXT_ARG's getevents argument
 * carries min_wait_usec, a time after which a wait for wait_nr completions
 * returns with the ones that have arrived (at least one). A header that
 * defines IORING_FEAT_MIN_TIMEOUT names the field; 2.3's calls it pad. */
#ifdef IORING_FEAT_MIN_TIMEOUT
#define IOLAB_GETEVENTS_MIN_WAIT(arg) ((arg).min_wait_usec)
#else
#define IORING_FEAT_MIN_TIMEOUT (1U << 15)
#define IOLAB_GETEVENTS_MIN_WAIT(arg) ((arg).pad)
#endif

#endif
