/* Unit tests of what every report writes with: the JSON writer (json.c: escaping, non-finite
 * numbers, nesting), byte formatting (format.c) and the findings list (findings.c). */
#include <math.h>

#include "builder.h"
#include "findings.h"
#include "format.h"
#include "json.h"

/* The JSON document the writer makes, in a string (caller frees). */
static char *json_of(void (*fill)(struct icx_json *j))
{
    char *text = NULL;
    size_t len = 0;
    FILE *f = open_memstream(&text, &len);
    struct icx_json j;
    icx_json_begin(&j, f);
    icx_json_obj(&j, NULL);
    fill(&j);
    icx_json_end(&j);
    fclose(f);
    return text;
}

static void fill_strings(struct icx_json *j)
{
    icx_json_str(j, "s", "a\"b\\c\n\t\x01/é");
    icx_json_num(j, "nan", NAN);
    icx_json_num(j, "inf", -INFINITY);
    icx_json_num(j, "x", 0.5);
    icx_json_int(j, "big", -9007199254740993ll);
    icx_json_null(j, "none");
    icx_json_bool(j, "yes", 1);
    icx_json_str(j, "null_str", NULL);
    icx_json_arr(j, "v");
    icx_json_int(j, NULL, 1);
    icx_json_obj(j, NULL);
    icx_json_end(j);
    icx_json_end(j);
}

static void test_json(void)
{
    char *t = json_of(fill_strings);
    /* Control characters as \u escapes, quotes and backslashes escaped, UTF-8 kept, non-finite
     * numbers null, integers whole: the one document json.c writes for these calls. */
    const char *want =
        "{\"s\":\"a\\\"b\\\\c\\u000a\\u0009\\u0001/\u00e9\",\"nan\":null,\"inf\":null,"
        "\"x\":0.5,\"big\":-9007199254740993,\"none\":null,\"yes\":true,"
        "\"null_str\":null,\"v\":[1,{}]}";
    CHECK(!strncmp(t, want, strlen(want)), "got  %s\nwant %s", t, want);
    /* Balanced, and parsable in structure: every opener closed in order. */
    char stack[64];
    int depth = 0, in_str = 0;
    for (const char *c = t; *c; c++) {
        if (in_str) {
            if (*c == '\\')
                c++;
            else if (*c == '"')
                in_str = 0;
        } else if (*c == '"')
            in_str = 1;
        else if (*c == '{' || *c == '[')
            stack[depth++] = *c == '{' ? '}' : ']';
        else if (*c == '}' || *c == ']') {
            CHECK(depth > 0 && stack[depth - 1] == *c, "unbalanced at %s", c);
            depth--;
        }
    }
    CHECK(depth == 0 && !in_str, "unclosed: %s", t);
    free(t);
    passes++;
}

static void test_fmt_bytes(void)
{
    char b[32];
    icx_fmt_bytes(b, sizeof(b), 384.0 * 1024 * 1024);
    CHECK(!strcmp(b, "384.0 MiB"), "%s", b);
    icx_fmt_bytes(b, sizeof(b), 512);
    CHECK(strstr(b, "512") && strstr(b, "B"), "%s", b);
    icx_fmt_bytes(b, sizeof(b), 3.0 * 1024 * 1024 * 1024 * 1024);
    CHECK(!strcmp(b, "3.0 TiB"), "%s", b);
    icx_fmt_bytes(b, 4, 1e12); /* truncated, never overflowed */
    CHECK(strlen(b) == 3, "'%s'", b);
    passes++;
}

static void test_findings(void)
{
    struct icx_findings F = {0};
    struct icx_proc p;
    memset(&p, 0, sizeof(p));
    p.pid = 7;
    p.rank = 2;
    p.host = "nodeB";
    char long_evidence[5000];
    memset(long_evidence, 'x', sizeof(long_evidence) - 1);
    long_evidence[sizeof(long_evidence) - 1] = 0;
    icx_finding_add(&F, "nic_degraded", &p, long_evidence, "reseat the cable");
    icx_finding_add(&F, "rank_missing", NULL, "rank 5 wrote no trace", "");
    CHECK(F.n == 2, "%zu findings", F.n);
    CHECK(F.v[0].pid == 7 && F.v[0].rank == 2 && !strcmp(F.v[0].host, "nodeB") &&
              strlen(F.v[0].evidence) == sizeof(F.v[0].evidence) - 1,
          "first: pid %d rank %d host %s", F.v[0].pid, F.v[0].rank, F.v[0].host);
    CHECK(F.v[1].pid == -1 && !strcmp(F.v[1].kind, "rank_missing"), "second: pid %d", F.v[1].pid);
    icx_findings_free(&F);
    CHECK(F.n == 0, "freed");
    passes++;
}

int main(void)
{
    test_json();
    test_fmt_bytes();
    test_findings();
    printf("output: %d passed, %d failed\n", passes, failures);
    return failures ? 1 : 0;
}
