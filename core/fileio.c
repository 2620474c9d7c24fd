/* fileio.c - the one capped, type-checked reader and the one atomic writer (fileio.h). */
#include "fileio.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/types.h>
#include <unistd.h>

char *wb_path_join(const char *dir, const char *file) {
    size_t n = strlen(dir) + strlen(file) + 2;
    char *p = malloc(n);
    if (p) snprintf(p, n, "%s/%s", dir, file);
    return p;
}

static const char *file_kind(mode_t m) {
    return S_ISDIR(m) ? "a directory" : S_ISFIFO(m) ? "a FIFO" : S_ISCHR(m) ? "a character device"
           : S_ISBLK(m) ? "a block device" : S_ISSOCK(m) ? "a socket" : "not a regular file";
}

wb_status wb_open_regular(const char *path, int *fd_out, uint64_t *size, wb_err *err) {
    *fd_out = -1;
    if (size) *size = 0;
    if (!path) return wb_err_set(err, WB_ERR_ARG, "file path is NULL");
    /* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a writer forever. */
    int fd = open(path, O_RDONLY | O_NONBLOCK | O_CLOEXEC | O_NOCTTY);
    if (fd < 0) return wb_err_set(err, WB_ERR_IO, "%s: cannot open: %s", path, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0) {
        int e = errno;
        close(fd);
        return wb_err_set(err, WB_ERR_IO, "%s: cannot stat: %s", path, strerror(e));
    }
    if (!S_ISREG(sb.st_mode)) {
        close(fd);
        return wb_err_set(err, WB_ERR_IO, "%s: is %s, not a regular file", path,
                          file_kind(sb.st_mode));
    }
    /* Regular files never block; clear the flag so reads behave as usual. */
    int fl = fcntl(fd, F_GETFL);
    if (fl >= 0) (void)fcntl(fd, F_SETFL, fl & ~O_NONBLOCK);
    *fd_out = fd;
    if (size) *size = (uint64_t)sb.st_size;
    return WB_OK;
}

static wb_status read_fd(int fd, const char *path, size_t max_bytes, uint64_t size, char **out,
                         size_t *len, wb_err *err) {
    if (size > max_bytes)
        return wb_err_set(err, WB_ERR_FORMAT, "%s: larger than %zu bytes", path, max_bytes);
    /* fstat's size sizes the buffer; a file that grows while it is read is still capped: at most
     * max_bytes + 1 bytes are read, and the last one only tells "too large" from "exactly max". */
    size_t cap = (size_t)size + 2, n = 0;
    char *buf = malloc(cap);
    if (!buf) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    for (;;) {
        if (n + 1 == cap) {
            size_t nc = cap <= (max_bytes + 2) / 2 ? cap * 2 : max_bytes + 2;
            char *q = realloc(buf, nc);
            if (!q) {
                free(buf);
                return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
            }
            buf = q;
            cap = nc;
        }
        ssize_t r = read(fd, buf + n, cap - 1 - n);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            int e = errno;
            free(buf);
            return wb_err_set(err, WB_ERR_IO, "%s: read error: %s", path, strerror(e));
        }
        if (r == 0) break;
        n += (size_t)r;
        if (n > max_bytes) {
            free(buf);
            return wb_err_set(err, WB_ERR_FORMAT, "%s: larger than %zu bytes", path, max_bytes);
        }
    }
    buf[n] = '\0';
    *out = buf;
    *len = n;
    return WB_OK;
}

static wb_status read_file(const char *path, size_t max_bytes, int optional, char **out,
                           size_t *len, wb_err *err) {
    *out = NULL;
    *len = 0;
    if (optional && path && access(path, F_OK) != 0 && errno == ENOENT) return WB_OK;
    int fd;
    uint64_t size;
    wb_status st = wb_open_regular(path, &fd, &size, err);
    if (st != WB_OK) return st;
    st = read_fd(fd, path, max_bytes, size, out, len, err);
    close(fd);
    return st;
}

wb_status wb_read_file(const char *path, size_t max_bytes, char **out, size_t *len, wb_err *err) {
    return read_file(path, max_bytes, 0, out, len, err);
}

wb_status wb_read_file_optional(const char *path, size_t max_bytes, char **out, size_t *len,
                                wb_err *err) {
    return read_file(path, max_bytes, 1, out, len, err);
}

/* ---- atomic writes ------------------------------------------------------------------------- */

struct wb_atomic_file {
    int fd;
    int failed;
    char *path, *tmp;
};

void wb_atomic_abort(wb_atomic_file *f) {
    if (!f) return;
    if (f->fd >= 0) close(f->fd);
    if (f->tmp) unlink(f->tmp);
    free(f->path);
    free(f->tmp);
    free(f);
}

wb_status wb_atomic_begin(const char *path, wb_atomic_file **out, wb_err *err) {
    if (!out) return wb_err_set(err, WB_ERR_ARG, "atomic write: out is NULL");
    *out = NULL;
    if (!path || !*path) return wb_err_set(err, WB_ERR_ARG, "atomic write: path is empty");
    wb_atomic_file *f = calloc(1, sizeof *f);
    size_t pl = strlen(path);
    if (f) {
        f->fd = -1;
        f->path = malloc(pl + 1);
        f->tmp = malloc(pl + 32);
    }
    if (!f || !f->path || !f->tmp) {
        wb_atomic_abort(f);
        return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    }
    memcpy(f->path, path, pl + 1);
    snprintf(f->tmp, pl + 32, "%s.tmp.%ld", path, (long)getpid());
    struct stat sb;
    mode_t mode = 0666;
    int have_old = stat(path, &sb) == 0;
    if (have_old && S_ISDIR(sb.st_mode)) {
        wb_atomic_abort(f);
        return wb_err_set(err, WB_ERR_IO, "%s: is a directory", path);
    }
    if (have_old && S_ISREG(sb.st_mode)) mode = sb.st_mode & 07777;
    f->fd = open(f->tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC | O_NOFOLLOW, 0600);
    if (f->fd < 0) {
        int e = errno;
        free(f->tmp);
        f->tmp = NULL; /* nothing to unlink: it was not created */
        wb_atomic_abort(f);
        return wb_err_set(err, WB_ERR_IO, "%s: cannot create a temporary file next to it: %s",
                          path, strerror(e));
    }
    if (have_old && S_ISREG(sb.st_mode)) (void)fchmod(f->fd, mode);
    else {
        mode_t um = umask(0);
        umask(um);
        (void)fchmod(f->fd, mode & ~um);
    }
    *out = f;
    return WB_OK;
}

wb_status wb_atomic_write(wb_atomic_file *f, const void *data, size_t n, wb_err *err) {
    if (!f) return wb_err_set(err, WB_ERR_ARG, "atomic write: file is NULL");
    if (f->failed) return wb_err_set(err, WB_ERR_STATE, "%s: an earlier write failed", f->path);
    const char *p = data;
    while (n > 0) {
        size_t chunk = n > ((size_t)1 << 30) ? ((size_t)1 << 30) : n;
        ssize_t w = write(f->fd, p, chunk);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            int e = w < 0 ? errno : ENOSPC;
            f->failed = 1;
            return wb_err_set(err, WB_ERR_IO, "%s: write failed: %s (the file is unchanged)",
                              f->path, strerror(e));
        }
        p += w;
        n -= (size_t)w;
    }
    return WB_OK;
}

wb_status wb_atomic_commit(wb_atomic_file *f, wb_err *err) {
    if (!f) return wb_err_set(err, WB_ERR_ARG, "atomic write: file is NULL");
    if (f->failed) {
        wb_status st = wb_err_set(err, WB_ERR_IO, "%s: an earlier write failed (the file is "
                                  "unchanged)", f->path);
        wb_atomic_abort(f);
        return st;
    }
    const char *step = NULL;
    int e = 0;
    if (fsync(f->fd) != 0) step = "fsync", e = errno;
    int c = close(f->fd);
    f->fd = -1;
    if (!step && c != 0) step = "close", e = errno;
    if (!step && rename(f->tmp, f->path) != 0) step = "rename", e = errno;
    if (step) {
        wb_status st = wb_err_set(err, WB_ERR_IO, "%s: %s failed: %s (the file is unchanged)",
                                  f->path, step, strerror(e));
        wb_atomic_abort(f);
        return st;
    }
    /* The rename is durable once the directory entry is: fsync the directory (best effort:
     * some file systems refuse fsync on a directory). */
    char *slash = strrchr(f->path, '/');
    int dfd;
    if (!slash) dfd = open(".", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    else if (slash == f->path) dfd = open("/", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    else {
        *slash = 0;
        dfd = open(f->path, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
        *slash = '/';
    }
    if (dfd >= 0) {
        (void)fsync(dfd);
        close(dfd);
    }
    free(f->tmp);
    f->tmp = NULL;
    wb_atomic_abort(f);
    return WB_OK;
}

wb_status wb_write_file_atomic(const char *path, const void *data, size_t n, wb_err *err) {
    wb_atomic_file *f;
    wb_status st = wb_atomic_begin(path, &f, err);
    if (st != WB_OK) return st;
    if ((st = wb_atomic_write(f, data, n, err)) != WB_OK) {
        wb_atomic_abort(f);
        return st;
    }
    return wb_atomic_commit(f, err);
}

wb_status wb_remove_stale_temps(const char *path, int *removed, wb_err *err) {
    if (removed) *removed = 0;
    if (!path || !*path) return wb_err_set(err, WB_ERR_ARG, "stale temps: path is empty");
    const char *slash = strrchr(path, '/');
    size_t dl = slash ? (size_t)(slash - path) : 0;
    char *dir = malloc(dl + 2);
    if (!dir) return wb_err_set(err, WB_ERR_NOMEM, "%s: out of memory", path);
    if (!slash) strcpy(dir, ".");
    else if (dl == 0) strcpy(dir, "/");
    else memcpy(dir, path, dl), dir[dl] = 0;
    const char *base = slash ? slash + 1 : path;
    size_t bl = strlen(base);
    DIR *d = opendir(dir);
    if (!d) {
        int e = errno;
        free(dir);
        if (e == ENOENT) return WB_OK;
        return wb_err_set(err, WB_ERR_IO, "%s: cannot list its directory: %s", path, strerror(e));
    }
    struct dirent *de;
    while ((de = readdir(d))) {
        const char *nm = de->d_name;
        if (strncmp(nm, base, bl) != 0 || strncmp(nm + bl, ".tmp.", 5) != 0) continue;
        const char *digits = nm + bl + 5;
        char *end;
        long pid = strtol(digits, &end, 10);
        if (!*digits || *end || pid <= 0) continue;
        if (pid == (long)getpid()) continue;
        if (kill((pid_t)pid, 0) == 0 || errno == EPERM) continue; /* still running */
        char *full = wb_path_join(dir, nm);
        if (full && unlink(full) == 0 && removed) (*removed)++;
        free(full);
    }
    closedir(d);
    free(dir);
    return WB_OK;
}
