/* Tests of the fuzz targets (tests/fuzz/fuzz_*.c) without clang: every
 * committed corpus input — seeds and the inputs that once broke something —
 * replayed through its target (programs, .npy files, traces), the program
 * seeds matched against the programs they come from, and the dictionary
 * against the format's words. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "ir/lex.h"
#include "fuzz.h"
#include "../test.h"

#define CORPUS "tests/fuzz/corpus"

/* Replays every corpus file; the seeds (seed-*) must pass the dry run. */
static void test_replay_corpus(void)
{
    DIR *d = opendir(CORPUS);
    struct dirent *e;
    int files = 0, seeds = 0, verified = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        size_t len;
        char *data;
        hn_fuzz_outcome out;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", CORPUS, e->d_name);
        data = hn_test_read_file(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(data);
        hn_fuzz_program((const uint8_t *)data, len, &out);
        if (out.broken[0] != '\0')
            fprintf(stderr, "\n  %s (%d ranks, %d streams): %s\n", path, out.ranks, out.nstreams,
                    out.broken);
        CU_ASSERT_STRING_EQUAL(out.broken, "");
        if (strncmp(e->d_name, "seed-", 5) == 0) {
            if (out.stage != HN_FUZZ_VERIFIED)
                fprintf(stderr, "\n  %s: the seed stops at stage %d\n", path, (int)out.stage);
            CU_ASSERT_EQUAL(out.stage, HN_FUZZ_VERIFIED);
            seeds++;
        }
        verified += out.stage == HN_FUZZ_VERIFIED;
        files++;
        free(data);
    }
    closedir(d);
    printf("\n  fuzz corpus: %d inputs (%d seeds), %d pass the dry run\n", files, seeds, verified);
    CU_ASSERT(seeds >= 14);
}

/* Replays every file of one reader's corpus through its target; its seeds
 * (seed-*) must be read, not refused. */
static void replay_files(const char *dir, void (*target)(const uint8_t *, size_t, hn_fuzz_file_outcome *),
                         int min_seeds)
{
    DIR *d = opendir(dir);
    struct dirent *e;
    int files = 0, seeds = 0, accepted = 0;
    CU_ASSERT_PTR_NOT_NULL_FATAL(d);
    while ((e = readdir(d)) != NULL) {
        char path[512];
        size_t len;
        char *data;
        hn_fuzz_file_outcome out;
        if (e->d_name[0] == '.')
            continue;
        snprintf(path, sizeof(path), "%s/%s", dir, e->d_name);
        data = hn_test_read_file(path, &len);
        CU_ASSERT_PTR_NOT_NULL_FATAL(data);
        target((const uint8_t *)data, len, &out);
        if (out.broken[0] != '\0')
            fprintf(stderr, "\n  %s: %s\n", path, out.broken);
        CU_ASSERT_STRING_EQUAL(out.broken, "");
        if (strncmp(e->d_name, "seed-", 5) == 0) {
            if (!out.accepted)
                fprintf(stderr, "\n  %s: the seed is refused\n", path);
            CU_ASSERT_TRUE(out.accepted);
            seeds++;
        }
        accepted += out.accepted;
        files++;
        free(data);
    }
    closedir(d);
    printf("\n  %s: %d inputs (%d seeds), %d read", dir, files, seeds, accepted);
    CU_ASSERT(seeds >= min_seeds);
}

static void test_replay_npy(void) { replay_files(CORPUS "-npy", hn_fuzz_npy, 8); }

static void test_replay_trace(void) { replay_files(CORPUS "-trace", hn_fuzz_trace, 4); }

/* seed-<dir>-<name> is examples/<name>.hir or tests/programs/<name>.hir
 * behind the default header; `make fuzz-seeds` writes them. */
static void test_seeds_match_programs(void)
{
    static const struct {
        const char *dir, *tag;
    } dirs[] = {{"examples", "examples"}, {"tests/programs", "programs"}};
    int programs = 0;
    for (int k = 0; k < HN_ARRAY_LEN(dirs); k++) {
        DIR *d = opendir(dirs[k].dir);
        struct dirent *e;
        CU_ASSERT_PTR_NOT_NULL_FATAL(d);
        while ((e = readdir(d)) != NULL) {
            char path[512], seed[512];
            size_t n = strlen(e->d_name), len, seed_len;
            char *text, *data;
            if (n < 5 || strcmp(e->d_name + n - 4, ".hir") != 0)
                continue;
            snprintf(path, sizeof(path), "%s/%s", dirs[k].dir, e->d_name);
            snprintf(seed, sizeof(seed), "%s/seed-%s-%.*s", CORPUS, dirs[k].tag, (int)(n - 4),
                     e->d_name);
            text = hn_test_read_file(path, &len);
            data = hn_test_read_file(seed, &seed_len);
            if (data == NULL || seed_len != HN_FUZZ_HEADER + len ||
                memcmp(data + HN_FUZZ_HEADER, text, len) != 0)
                fprintf(stderr, "\n  %s: no seed %s of it (make fuzz-seeds)\n", path, seed);
            CU_ASSERT_PTR_NOT_NULL(data);
            CU_ASSERT(data != NULL && seed_len == HN_FUZZ_HEADER + len &&
                      memcmp(data + HN_FUZZ_HEADER, text, len) == 0);
            free(text);
            free(data);
            programs++;
        }
        closedir(d);
    }
    CU_ASSERT(programs >= 14);
}

static void expect_word(const char *dict, const char *word)
{
    char quoted[64];
    snprintf(quoted, sizeof(quoted), "\"%s\"", word);
    if (strstr(dict, quoted) == NULL)
        fprintf(stderr, "\n  tests/fuzz/hir.dict lacks %s (tests/fuzz/gen_dict.sh)\n", quoted);
    CU_ASSERT_PTR_NOT_NULL(strstr(dict, quoted));
}

/* Every instruction keyword, punctuation, dtype, reduction and communicator. */
static void test_dictionary(void)
{
    char *dict = hn_test_read_file("tests/fuzz/hir.dict", NULL);
    CU_ASSERT_PTR_NOT_NULL_FATAL(dict);
    for (int i = 0; i < HN_OP_COUNT; i++)
        expect_word(dict, hn_op_table[i].keyword);
    for (int i = 0; i < HN_P_COUNT; i++)
        expect_word(dict, hn_punct_text((hn_punct)i));
    for (int i = 0; i < HN_DTYPE_COUNT; i++)
        expect_word(dict, hn_dtype_name((hn_dtype)i));
    for (int i = 0; i < HN_RED_COUNT; i++)
        expect_word(dict, hn_redop_name((hn_redop)i));
    for (int i = 0; i < HN_VIA_COUNT; i++)
        expect_word(dict, hn_via_name((hn_via)i));
    free(dict);
}

void hn_suite_fuzz(void)
{
    static CU_TestInfo tests[] = {
        {"every corpus input replayed through the fuzz target", test_replay_corpus},
        {"the seeds are the examples and golden programs", test_seeds_match_programs},
        {"every .npy corpus input replayed through its target", test_replay_npy},
        {"every trace corpus input replayed through its target", test_replay_trace},
        {"the dictionary holds every word of the format", test_dictionary},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("fuzz/corpus", tests);
}
