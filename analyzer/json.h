/* A small streaming JSON writer for the analyzer's --json output (RFC 8259 strings, no NaN). */
#ifndef ICX_JSON_H
#define ICX_JSON_H

#include <stdint.h>
#include <stdio.h>

struct icx_json {
    FILE *out;
    int depth;
    int need_comma[64];
    char closer[64];
};

void icx_json_begin(struct icx_json *j, FILE *out);
void icx_json_obj(struct icx_json *j, const char *key); /* key NULL inside arrays / at top */
void icx_json_arr(struct icx_json *j, const char *key);
void icx_json_end(struct icx_json *j); /* closes the innermost object or array */
void icx_json_str(struct icx_json *j, const char *key, const char *v);
void icx_json_int(struct icx_json *j, const char *key, long long v);
void icx_json_num(struct icx_json *j, const char *key, double v); /* non-finite -> null */
/* v with a fixed number of decimals (timestamps: shorter than %.17g), non-finite -> null */
void icx_json_fix(struct icx_json *j, const char *key, double v, int decimals);
void icx_json_bool(struct icx_json *j, const char *key, int v);
void icx_json_null(struct icx_json *j, const char *key);

#endif
