/* Trace reader: validates icxtrace files (format: include/icx/trace_format.h) and hands each
 * record to the decoder of its family, which fills the model (model.h).  Never trusts its input:
 * every length is checked, a corrupt or truncated frame is skipped and counted, and reading resumes
 * at the next intact frame. */
#ifndef ICX_READER_H
#define ICX_READER_H

#include "model.h"

/* Read one file (a trace, or a concatenation of traces).  0 on success, including a damaged file
 * whose intact frames were read (the damage is counted in its icx_input); -1 for a file that is
 * not a readable trace at all, with a one-line reason in err. */
int icx_read_file(struct icx_trace *t, const char *path, char *err, size_t errlen);
/* Read a path that may be a directory (every *.icx.zst inside, sorted, and *.icx.zst.PID: the
 * name the tracer gives a second process of the same name).  Returns the number of files that
 * failed; their errors go to stderr. */
int icx_read_path(struct icx_trace *t, const char *path);
/* The trace files of directory `path` (the names icx_read_path reads), sorted: *names a malloc'ed
 * array of *count malloc'ed "path/name" strings.  0, or -1 (errno set) when the directory cannot
 * be opened. */
int icx_trace_names(const char *path, char ***names, size_t *count);
/* Decode an in-memory trace (used by the file reader and the fuzz targets). */
int icx_read_buffer(struct icx_trace *t, const char *name, const uint8_t *buf, size_t len,
                    char *err, size_t errlen);

#endif
