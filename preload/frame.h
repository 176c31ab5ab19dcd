/* The frame being built by the writer: records appended by the writer thread's modules, string
 * interning (a string's STRING record goes into the frame before the record that uses it), and
 * notes, which any thread may queue for the next frame. */
#ifndef ICX_FRAME_H
#define ICX_FRAME_H

#include <stddef.h>
#include <stdint.h>

struct icx_frame {
    uint8_t *buf;
    size_t len, cap;
};

/* Append a record of `size` bytes (rounded up to 8), zeroed but for its header; NULL when out of
 * memory or too large.  Writer thread, or under the writer lock. */
void *icx_frame_put(struct icx_frame *f, uint16_t type, uint32_t aux, size_t size);
/* The id of string s in this stream; its STRING record goes into f the first time.  0 for NULL
 * or out of memory.  Writer thread, or under the writer lock. */
uint32_t icx_intern(struct icx_frame *f, const char *s);
/* Texts longer than a record can hold are written as parts of this many bytes. */
#define ICX_PART_BYTES 60000
/* The string id of part i (ICX_PART_BYTES each) of text (len bytes). */
uint32_t icx_intern_part(struct icx_frame *f, char *text, size_t len, size_t i);
/* Forget every interned string (a new stream starts: a traced fork child). */
void icx_intern_reset(void);

/* A human-readable fact for the trace (NOTE record; severity 0 info, 1 warning), from any thread:
 * queued, written with the next frame. */
void icx_note(int severity, const char *text);
/* Writer: the queued notes into f. */
void icx_notes_put(struct icx_frame *f);

#endif
