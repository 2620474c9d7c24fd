/* fileio.h - internal: the one way the core reads and writes files.
 *
 * Reading: every file the core reads is opened here, non-blocking, and checked with fstat before
 * a byte is read, so a FIFO, a device (/dev/zero) or a directory named like a model file is an
 * error naming the path instead of a hang; whole-file reads have a size cap.
 *
 * Writing: every file is written atomically. The bytes go to "<path>.tmp.<pid>" in the same
 * directory, every write and the close are checked, the file is fsync'ed and only then renamed
 * over the target (and the directory fsync'ed). Any failure removes the temporary file, leaves
 * the old target untouched and returns an error naming the path. */
#ifndef WB_FILEIO_H
#define WB_FILEIO_H

#include "wb_base.h"

#include <stdint.h>

/* "dir/file" in malloc'd memory; NULL when out of memory. */
char *wb_path_join(const char *dir, const char *file);

/* Open path read-only if it is a regular file (O_NONBLOCK, then fstat: a FIFO or a device never
 * blocks the open). On success *fd is an open descriptor (caller closes) and *size the file
 * size. A missing file is WB_ERR_IO with the path and strerror(ENOENT). */
wb_status wb_open_regular(const char *path, int *fd, uint64_t *size, wb_err *err);

/* Read a whole regular file into malloc'd memory, NUL-terminated (*len excludes the NUL). A file
 * larger than max_bytes is WB_ERR_FORMAT; errors name the path. */
wb_status wb_read_file(const char *path, size_t max_bytes, char **out, size_t *len, wb_err *err);

/* The same for a file that may be absent: a missing file is WB_OK with *out = NULL. */
wb_status wb_read_file_optional(const char *path, size_t max_bytes, char **out, size_t *len,
                                wb_err *err);

/* ---- atomic writes ------------------------------------------------------------------------- */

typedef struct wb_atomic_file wb_atomic_file;

/* Start writing path: creates "<path>.tmp.<pid>" (mode of the existing target if there is one,
 * else 0666 & ~umask). */
wb_status wb_atomic_begin(const char *path, wb_atomic_file **out, wb_err *err);

/* Append n bytes; a short or failed write is an error naming the path. After an error, only
 * wb_atomic_abort is allowed. */
wb_status wb_atomic_write(wb_atomic_file *f, const void *data, size_t n, wb_err *err);

/* fsync, close, rename over the target, fsync the directory; frees f in every case. On failure
 * the temporary file is removed and the target is as it was. */
wb_status wb_atomic_commit(wb_atomic_file *f, wb_err *err);

/* Give up: remove the temporary file and free f. NULL is a no-op. */
void wb_atomic_abort(wb_atomic_file *f);

/* The whole sequence for one buffer. */
wb_status wb_write_file_atomic(const char *path, const void *data, size_t n, wb_err *err);

/* Remove "<path>.tmp.<pid>" files left by processes that no longer run (a kill -9 during a write).
 * Files of live processes are kept. *removed (may be NULL) counts the files removed. */
wb_status wb_remove_stale_temps(const char *path, int *removed, wb_err *err);

#endif
