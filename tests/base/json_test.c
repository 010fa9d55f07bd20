/* Tests of src/base/json.c: what the strict reader accepts and rejects,
 * the tree it builds, the writer's escaping read back, allocation
 * failures. */
#include <math.h>
#include <string.h>

#include "base/json.h"
#include "../test.h"

static int parses(const char *text)
{
    hn_json *j = NULL;
    hn_status_t st = hn_json_parse(text, strlen(text), &j, NULL);
    hn_json_free(j);
    return st == HN_OK;
}

static void test_accepts(void)
{
    static const char *ok[] = {
        "0", "-0", "1.5", "-12.25e+3", "1E-2", "123456789012345", "true", "false", "null", "\"\"",
        "\"a\\\"b\\\\c\\/d\\b\\f\\n\\r\\t\"", "\"\\u00e9\\u20ac\\ud83d\\ude00\"", "\"\xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80\"",
        "[]", "{}", " [ 1 , [ 2 , { } ] ] ", "{\"a\":1,\"b\":[true,null],\"c\":{\"d\":\"e\"}}", "\t\r\n 7 \n",
    };
    for (int i = 0; i < HN_ARRAY_LEN(ok); i++) {
        if (!parses(ok[i]))
            fprintf(stderr, "\n  rejected: %s\n", ok[i]);
        CU_ASSERT_TRUE(parses(ok[i]));
    }
}

static void test_rejects(void)
{
    static const char *bad[] = {
        "", " ", "01", "-", "1.", ".5", "1e", "+1", "0x10", "NaN", "Infinity", "tru", "nul", "True",
        "[1,]", "[,1]", "{\"a\":1,}", "{a:1}", "{'a':1}", "{\"a\" 1}", "{\"a\":1 \"b\":2}", "[1 2]", "[1",
        "{\"a\":1", "\"abc", "\"a\nb\"", "\"\\x\"", "\"\\u12\"", "\"\\ud800\"", "\"\\udc00\"",
        "\"\\ud800\\u0041\"", "\"\xff\"", "\"\xc0\xaf\"", "\"\xed\xa0\x80\"", "\"\xf4\x90\x80\x80\"", "1 2",
        "[] x", "/* c */ 1", "{\"a\":1,\"a\":2}",
    };
    for (int i = 0; i < HN_ARRAY_LEN(bad); i++) {
        if (parses(bad[i]))
            fprintf(stderr, "\n  accepted: %s\n", bad[i]);
        CU_ASSERT_FALSE(parses(bad[i]));
    }
    /* a NUL byte inside the text is no JSON either */
    {
        hn_json *j = NULL;
        CU_ASSERT_EQUAL(hn_json_parse("[1]\0", 4, &j, NULL), HN_ERR_PARSE);
        CU_ASSERT_PTR_NULL(j);
    }
}

static void test_depth_and_position(void)
{
    char deep[200];
    hn_strbuf err;
    hn_json *j = NULL;
    memset(deep, '[', 100);
    memset(deep + 100, ']', 100);
    CU_ASSERT_EQUAL(hn_json_parse(deep, 200, &j, NULL), HN_ERR_PARSE);
    CU_ASSERT_TRUE(parses("[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[[1]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]]"));
    hn_sb_init(&err);
    CU_ASSERT_EQUAL(hn_json_parse("{\"a\": [1,\n  2,, 3]}", 19, &j, &err), HN_ERR_PARSE);
    CU_ASSERT_PTR_NOT_NULL_FATAL(err.data);
    CU_ASSERT_PTR_NOT_NULL(strstr(err.data, "2:5: "));
    hn_sb_free(&err);
}

static void test_tree(void)
{
    const char *text = "{\"name\": \"x\\u00e9\", \"n\": -2.5e1, \"list\": [1, \"two\", false], \"o\": {}}";
    hn_json *j = NULL;
    const hn_json *list;
    CU_ASSERT_EQUAL_FATAL(hn_json_parse(text, strlen(text), &j, NULL), HN_OK);
    CU_ASSERT_EQUAL(j->type, HN_JSON_OBJECT);
    CU_ASSERT_EQUAL(j->n, 4);
    CU_ASSERT_STRING_EQUAL(j->keys[2], "list");
    CU_ASSERT_STRING_EQUAL(hn_json_str(j, "name", "?"), "x\xc3\xa9");
    CU_ASSERT_EQUAL(hn_json_get(j, "name")->len, 3);
    CU_ASSERT_EQUAL(hn_json_num(j, "n", 0), -25.0);
    CU_ASSERT_EQUAL(hn_json_num(j, "name", 7), 7.0); /* not a number: the default */
    CU_ASSERT_PTR_NULL(hn_json_get(j, "absent"));
    list = hn_json_get(j, "list");
    CU_ASSERT_PTR_NOT_NULL_FATAL(list);
    CU_ASSERT_EQUAL(list->type, HN_JSON_ARRAY);
    CU_ASSERT_EQUAL(list->n, 3);
    CU_ASSERT_EQUAL(list->items[0].num, 1.0);
    CU_ASSERT_STRING_EQUAL(list->items[1].str, "two");
    CU_ASSERT_EQUAL(list->items[2].type, HN_JSON_FALSE);
    CU_ASSERT_EQUAL(hn_json_get(j, "o")->n, 0);
    hn_json_free(j);
}

/* What the writer escapes reads back as the same bytes; invalid UTF-8
 * becomes U+FFFD, so the output always parses. */
static void test_put_string(void)
{
    static const char *in[] = {"plain", "q\"uote\\back", "ctl\x01\n\t\x1f", "utf8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                               "bad \xff\xc0\xaf end", "trunc \xe2\x82"};
    static const char *want[] = {"plain", "q\"uote\\back", "ctl\x01\n\t\x1f", "utf8 \xc3\xa9\xe2\x82\xac\xf0\x9f\x98\x80",
                                 "bad \xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd end", "trunc \xef\xbf\xbd\xef\xbf\xbd"};
    for (int i = 0; i < HN_ARRAY_LEN(in); i++) {
        hn_strbuf sb;
        hn_json *j = NULL;
        hn_sb_init(&sb);
        hn_json_put_string(&sb, in[i]);
        CU_ASSERT_EQUAL_FATAL(hn_json_parse(sb.data, sb.len, &j, NULL), HN_OK);
        CU_ASSERT_EQUAL(j->type, HN_JSON_STRING);
        CU_ASSERT_STRING_EQUAL(j->str, want[i]);
        hn_json_free(j);
        hn_sb_free(&sb);
    }
}

/* Every allocation failing in turn: a clean HN_ERR_NOMEM, nothing leaked. */
static void test_allocation_failures(void)
{
    const char *text = "{\"a\": [1, \"two\", {\"b\": null, \"c\": [true]}], \"d\": \"\\u00e9xyz\"}";
    long total, nomem = 0;
    hn_json *j = NULL;
    hn_alloc_fail_after(1000000000L); /* counts the allocations of one parse */
    CU_ASSERT_EQUAL_FATAL(hn_json_parse(text, strlen(text), &j, NULL), HN_OK);
    hn_json_free(j);
    total = hn_alloc_fail_after(0);
    CU_ASSERT(total > 10);
    for (long n = 1; n <= total; n++) {
        hn_status_t st;
        j = NULL;
        hn_alloc_fail_after(n);
        st = hn_json_parse(text, strlen(text), &j, NULL);
        hn_alloc_fail_after(0);
        CU_ASSERT(st == HN_OK || st == HN_ERR_NOMEM);
        CU_ASSERT((st == HN_OK) == (j != NULL));
        nomem += st == HN_ERR_NOMEM;
        hn_json_free(j);
    }
    CU_ASSERT_EQUAL(nomem, total);
}

void hn_suite_json(void)
{
    static CU_TestInfo tests[] = {
        {"accepts JSON", test_accepts},
        {"rejects what is not strict JSON", test_rejects},
        {"depth limit, error positions", test_depth_and_position},
        {"the tree", test_tree},
        {"escaping reads back", test_put_string},
        {"allocation failures", test_allocation_failures},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("base/json", tests);
}
