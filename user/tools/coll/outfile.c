// SPDX-License-Identifier: MIT
/*
 * pd-coll's result files (--csv, and --plot's data), rank 0's alone.
 * Opened before anything runs, so that a path that cannot be written is
 * refused before an hour's sweep.  A file is written under a temporary
 * name beside it and renamed over the old one at the end: a run refused,
 * killed or short of disk leaves an earlier file as it was.  What is not
 * a file of its own -- a pipe, a terminal, or the file that stdout or
 * stderr already goes to (--csv /dev/stdout >> log) -- is appended to in
 * place, never emptied or replaced.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll.h"

static bool same_file_as_fd(const struct stat *st, int fd)
{
	struct stat o;

	return !fstat(fd, &o) && o.st_dev == st->st_dev && o.st_ino == st->st_ino;
}

int outfile_open(struct outfile *of, const char *path, const char *what)
{
	struct stat st;
	bool exists = !stat(path, &st);
	mode_t mask;
	int fd;

	*of = (struct outfile) { .path = path, .what = what };
	if (exists && (!S_ISREG(st.st_mode) || same_file_as_fd(&st, 1) || same_file_as_fd(&st, 2))) {
		of->f = fopen(path, "a");
	} else if ((size_t)snprintf(of->tmp, sizeof(of->tmp), "%s.XXXXXX", path) >= sizeof(of->tmp)) {
		errno = ENAMETOOLONG;
	} else if ((fd = mkstemp(of->tmp)) >= 0) {
		/* The mode the file had, or what open() would give a new one. */
		mask = umask(0);
		umask(mask);
		if (fchmod(fd, exists ? st.st_mode & 07777 : 0666 & ~mask) || !(of->f = fdopen(fd, "w"))) {
			int err = errno;

			close(fd);
			unlink(of->tmp);
			errno = err;
		}
	}
	if (!of->f) {
		fprintf(stderr, "pd-coll: %s %s: %s\n", what, path, strerror(errno));
		of->tmp[0] = '\0';
		return -errno;
	}
	return 0;
}

/*
 * keep: the run went ahead, and what it wrote replaces the old file.
 * Otherwise the temporary file goes and the old one stays.  False if kept
 * output could not be written whole (the old file then stays too).
 */
bool outfile_close(struct outfile *of, bool keep)
{
	bool ok, beside = of->tmp[0];

	if (!of->f)
		return true;
	ok = !ferror(of->f);
	if (fclose(of->f))
		ok = false;
	of->f = NULL;
	if (beside) {
		if (keep && ok && rename(of->tmp, of->path)) {
			fprintf(stderr, "pd-coll: %s %s: %s\n", of->what, of->path, strerror(errno));
			ok = false;
		}
		if (!keep || !ok)
			unlink(of->tmp);
		of->tmp[0] = '\0';
	}
	if (keep && !ok)
		fprintf(stderr, "pd-coll: %s %s: could not write it whole%s\n", of->what, of->path,
			beside ? "; an earlier file of that name is left as it was" : "");
	return ok || !keep;
}
