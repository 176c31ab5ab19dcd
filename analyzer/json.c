/* Streaming JSON writer; see json.h. */
#include "json.h"

#include <math.h>

static void sep(struct icx_json *j, const char *key)
{
    if (j->depth > 0 && j->need_comma[j->depth])
        fputc(',', j->out);
    if (j->depth > 0)
        j->need_comma[j->depth] = 1;
    if (key) {
        fputc('"', j->out);
        for (const char *p = key; *p; p++)
            fputc(*p, j->out);
        fputs("\":", j->out);
    }
}

static void open_(struct icx_json *j, const char *key, char o, char c)
{
    sep(j, key);
    fputc(o, j->out);
    if (j->depth < 63) {
        j->depth++;
        j->need_comma[j->depth] = 0;
        j->closer[j->depth] = c;
    }
}

/* Length of the valid UTF-8 sequence at p, 0 if invalid. */
static int utf8_len(const unsigned char *p)
{
    if (p[0] < 0x80)
        return 1;
    int n = (p[0] & 0xE0) == 0xC0 ? 2 : (p[0] & 0xF0) == 0xE0 ? 3 : (p[0] & 0xF8) == 0xF0 ? 4 : 0;
    if (n == 0 || (n == 2 && p[0] < 0xC2) || (n == 4 && p[0] > 0xF4))
        return 0;
    for (int i = 1; i < n; i++)
        if ((p[i] & 0xC0) != 0x80)
            return 0;
    if (n == 3 && ((p[0] == 0xE0 && p[1] < 0xA0) || (p[0] == 0xED && p[1] >= 0xA0)))
        return 0;
    if (n == 4 && ((p[0] == 0xF0 && p[1] < 0x90) || (p[0] == 0xF4 && p[1] >= 0x90)))
        return 0;
    return n;
}

void icx_json_begin(struct icx_json *j, FILE *out)
{
    j->out = out;
    j->depth = 0;
    j->need_comma[0] = 0;
}

void icx_json_obj(struct icx_json *j, const char *key)
{
    open_(j, key, '{', '}');
}

void icx_json_arr(struct icx_json *j, const char *key)
{
    open_(j, key, '[', ']');
}

void icx_json_end(struct icx_json *j)
{
    if (j->depth > 0) {
        fputc(j->closer[j->depth], j->out);
        j->depth--;
    }
    if (j->depth == 0)
        fputc('\n', j->out);
}

void icx_json_str(struct icx_json *j, const char *key, const char *v)
{
    sep(j, key);
    if (!v) {
        fputs("null", j->out);
        return;
    }
    fputc('"', j->out);
    const unsigned char *p = (const unsigned char *)v;
    while (*p) {
        int n = utf8_len(p);
        if (n == 0) {
            fputs("\\ufffd", j->out); /* not UTF-8: keep the JSON valid, mark the byte */
            p++;
        } else if (n > 1) {
            fwrite(p, 1, (size_t)n, j->out);
            p += n;
        } else {
            if (*p == '"' || *p == '\\')
                fprintf(j->out, "\\%c", *p);
            else if (*p < 0x20)
                fprintf(j->out, "\\u%04x", *p);
            else
                fputc(*p, j->out);
            p++;
        }
    }
    fputc('"', j->out);
}

void icx_json_int(struct icx_json *j, const char *key, long long v)
{
    sep(j, key);
    fprintf(j->out, "%lld", v);
}

void icx_json_num(struct icx_json *j, const char *key, double v)
{
    sep(j, key);
    if (isfinite(v))
        fprintf(j->out, "%.17g", v);
    else
        fputs("null", j->out);
}

void icx_json_fix(struct icx_json *j, const char *key, double v, int decimals)
{
    sep(j, key);
    if (isfinite(v))
        fprintf(j->out, "%.*f", decimals, v);
    else
        fputs("null", j->out);
}

void icx_json_bool(struct icx_json *j, const char *key, int v)
{
    sep(j, key);
    fputs(v ? "true" : "false", j->out);
}

void icx_json_null(struct icx_json *j, const char *key)
{
    sep(j, key);
    fputs("null", j->out);
}
