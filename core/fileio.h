/* fileio.h - internal: whole-file reads with a size cap, and path joining, for the loaders. */
#ifndef WB_FILEIO_H
#define WB_FILEIO_H

#include "wb_base.h"

/* "dir/file" in malloc'd memory; NULL when out of memory. */
char *wb_path_join(const char *dir, const char *file);

/* Read a whole file into malloc'd memory, NUL-terminated (*len excludes the NUL). A file larger
 * than max_bytes is WB_ERR_FORMAT (so a hostile path such as /dev/zero cannot exhaust memory);
 * errors name the path. */
wb_status wb_read_file(const char *path, size_t max_bytes, char **out, size_t *len, wb_err *err);

#endif
