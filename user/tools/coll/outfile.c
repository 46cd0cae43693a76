// SPDX-License-Identifier: MIT
/*
 * pd-coll's result files (--csv, and --plot's data), rank 0's alone.
 *
 * Checked before anything runs, so that a path that cannot be written is
 * refused before an hour's sweep; filled in memory during the run; written
 * when the run went ahead, whatever it found.  So a refused run leaves an
 * earlier file as it was, and the file keeps what it is: a symlink's
 * target is written, owner, mode and links stay.  The file that stdout or
 * stderr already goes to (--csv /dev/stdout > log) is written through that
 * stream, at its offset.  A killed run writes nothing (a new file stays
 * empty).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "coll.h"

static bool same_file_as_fd(const char *path, int fd)
{
	struct stat a, b;

	return !stat(path, &a) && !fstat(fd, &b) && a.st_dev == b.st_dev && a.st_ino == b.st_ino;
}

int outfile_open(struct outfile *of, const char *path, const char *what)
{
	struct stat st;
	bool may = false;
	int fd = -1, err;

	*of = (struct outfile) { .path = path, .what = what };
	if (!stat(path, &st)) {
		if (S_ISDIR(st.st_mode))
			errno = EISDIR;
		else if (!S_ISREG(st.st_mode))	/* a pipe or a device: opened at the end */
			may = true;
		else	/* may we write it?  Without emptying it */
			may = (fd = open(path, O_WRONLY | O_APPEND | O_CLOEXEC)) >= 0;
	} else if (errno == ENOENT && !lstat(path, &st)) {
		may = true;	/* a dangling symlink: its target is made at the end */
	} else if (errno == ENOENT) {
		may = of->created = (fd = open(path, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0666)) >= 0;
	}
	if (fd >= 0)
		close(fd);
	if (may) {
		of->f = open_memstream(&of->buf, &of->len);
		if (!of->f && of->created)
			unlink(path);
	}
	if (!of->f) {
		err = errno;
		fprintf(stderr, "pd-coll: %s %s: %s\n", what, path, strerror(err));
		return -err;
	}
	return 0;
}

/* 0, or the errno of the first write that failed. */
static int write_all(const struct outfile *of)
{
	FILE *f = NULL;
	int err = 0;

	if (same_file_as_fd(of->path, 1))
		f = stdout;
	else if (same_file_as_fd(of->path, 2))
		f = stderr;
	else if (!(f = fopen(of->path, "w")))
		return errno;
	if (fwrite(of->buf, 1, of->len, f) != of->len || fflush(f))
		err = errno ? errno : EIO;
	if (f != stdout && f != stderr && fclose(f) && !err)
		err = errno ? errno : EIO;
	return err;
}

/*
 * keep: the run went ahead, and what it gathered is written.  Otherwise
 * nothing is, and a file created by outfile_open() goes.  False if kept
 * results could not be written whole.
 */
bool outfile_close(struct outfile *of, bool keep)
{
	int err = 0;

	if (!of->f)
		return true;
	errno = 0;
	if (fclose(of->f) || !of->buf)
		err = errno ? errno : ENOMEM;
	of->f = NULL;
	if (keep && !err)
		err = write_all(of);
	if (keep && err)
		fprintf(stderr, "pd-coll: %s %s: could not write it whole: %s\n", of->what, of->path,
			strerror(err));
	if (!keep && of->created)
		unlink(of->path);
	free(of->buf);
	of->buf = NULL;
	return !keep || !err;
}
