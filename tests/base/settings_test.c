/* Tests of src/base/settings.c: the typed settings table, each getter, a
 * message in the options' format for every bad HIRNODE_* variable, and a
 * runtime that refuses to start on one. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hirnode/runtime.h"
#include "base/settings.h"
#include "../test.h"

/* The variables as the test found them, put back after each test. */
static char *saved[64];

static void save_env(void)
{
    CU_ASSERT_FATAL(hn_settings_count() <= HN_ARRAY_LEN(saved));
    for (int i = 0; i < hn_settings_count(); i++) {
        const char *v = getenv(hn_setting_at(i)->env);
        saved[i] = v != NULL ? strdup(v) : NULL;
        unsetenv(hn_setting_at(i)->env);
    }
}

static void restore_env(void)
{
    for (int i = 0; i < hn_settings_count(); i++) {
        if (saved[i] != NULL)
            setenv(hn_setting_at(i)->env, saved[i], 1);
        else
            unsetenv(hn_setting_at(i)->env);
        free(saved[i]);
        saved[i] = NULL;
    }
}

/* A runtime of 2 host ranks with the settings as they are: its status. */
static hn_status_t create_status(void)
{
    hn_runtime_config cfg;
    hn_runtime *rt = NULL;
    hn_log_level_t level = hn_log_level();
    hn_status_t st;
    hn_runtime_config_default(&cfg);
    cfg.ndev = 2;
    cfg.backend = "host";
    hn_log_set_level(HN_LOG_OFF); /* the refusals are expected */
    st = hn_runtime_create(&cfg, &rt);
    hn_log_set_level(level);
    if (st == HN_OK)
        hn_runtime_destroy(rt);
    else
        CU_ASSERT_PTR_NULL(rt);
    return st;
}

static void test_table(void)
{
    save_env();
    for (int i = 0; i < hn_settings_count(); i++) {
        const hn_setting *s = hn_setting_at(i);
        char env[64];
        size_t k = 0;
        /* HIRNODE_ and the name in capitals; unique; a help line */
        k = (size_t)snprintf(env, sizeof(env), "HIRNODE_");
        for (const char *c = s->name; *c && k + 1 < sizeof(env); c++)
            env[k++] = (char)(*c >= 'a' && *c <= 'z' ? *c - 32 : *c);
        env[k] = '\0';
        CU_ASSERT_STRING_EQUAL(s->env, env);
        CU_ASSERT_PTR_EQUAL(hn_setting_find(s->name), s);
        CU_ASSERT(s->help != NULL && strlen(s->help) > 10);
        for (int j = 0; j < i; j++)
            CU_ASSERT(strcmp(hn_setting_at(j)->name, s->name) != 0);
        /* every default is good, and is what the variable unset gives */
        CU_ASSERT_EQUAL(hn_setting_check(s, NULL), HN_OK);
        CU_ASSERT_STRING_EQUAL(hn_setting_get(s->name), s->def);
        if (s->kind == HN_SET_WORD)
            CU_ASSERT_PTR_NOT_NULL(s->words);
        if (s->kind == HN_SET_INT)
            CU_ASSERT(s->lo <= s->hi);
        if (s->kind == HN_SET_NUMBER)
            CU_ASSERT(s->dlo <= s->dhi);
        /* an empty variable is one not set */
        setenv(s->env, "", 1);
        CU_ASSERT_STRING_EQUAL(hn_setting_get(s->name), s->def);
        CU_ASSERT_EQUAL(hn_setting_check(s, NULL), HN_OK);
        unsetenv(s->env);
    }
    CU_ASSERT_PTR_NULL(hn_setting_find("no_such"));
    CU_ASSERT_PTR_NULL(hn_setting_get("no_such"));
    CU_ASSERT_EQUAL(hn_settings_check(NULL), HN_OK);
    CU_ASSERT_EQUAL(create_status(), HN_OK);
    restore_env();
}

/* Every setting, a bad value and the whole message. */
static const struct {
    const char *env, *value, *msg;
} bad[] = {
    {"HIRNODE_BACKEND", "gpu", "HIRNODE_BACKEND: expected auto, cuda or host, not 'gpu'"},
    {"HIRNODE_STREAMS", "5x", "HIRNODE_STREAMS: expected an integer from 1 to 16, not '5x'"},
    {"HIRNODE_STREAMS", "17", "HIRNODE_STREAMS: expected an integer from 1 to 16, not '17'"},
    {"HIRNODE_STREAMS", " 4", "HIRNODE_STREAMS: expected an integer from 1 to 16, not ' 4'"},
    {"HIRNODE_TIMEOUT", "abc", "HIRNODE_TIMEOUT: expected a number from 0.001 to 1e+06, not 'abc'"},
    {"HIRNODE_TIMEOUT", "0", "HIRNODE_TIMEOUT: expected a number from 0.001 to 1e+06, not '0'"},
    {"HIRNODE_HOST_DELAY_US", "nan", "HIRNODE_HOST_DELAY_US: expected a number from 0 to 1e+06, not 'nan'"},
    {"HIRNODE_HOST_MEM_MIB", "1.5", "HIRNODE_HOST_MEM_MIB: expected an integer from 0 to 1073741824, not '1.5'"},
    {"HIRNODE_SHARED_MEM_MIB", "-1", "HIRNODE_SHARED_MEM_MIB: expected an integer from 0 to 1073741824, not '-1'"},
    {"HIRNODE_SEED", "-1", "HIRNODE_SEED: expected an integer of at least 0, not '-1'"},
    {"HIRNODE_LOG", "verbose", "HIRNODE_LOG: expected off, error, warn, info, debug or trace, not 'verbose'"},
    {"HIRNODE_NCCL_BLOCKING", "yes", "HIRNODE_NCCL_BLOCKING: expected 0 or 1, not 'yes'"},
    {"HIRNODE_DEFAULT_VIA", "p2p", "HIRNODE_DEFAULT_VIA: expected auto or nccl, not 'p2p'"},
    {"HIRNODE_GRAPHS", "2", "HIRNODE_GRAPHS: expected 0 or 1, not '2'"},
    {"HIRNODE_REPLAY", "threads", "HIRNODE_REPLAY: expected bells, jobs or caller, not 'threads'"},
    {"HIRNODE_AUTO_LL", "true", "HIRNODE_AUTO_LL: expected auto, 1 or 0, not 'true'"},
    {"HIRNODE_NCCL_MAX_CTAS", "-1", "HIRNODE_NCCL_MAX_CTAS: expected an integer from 0 to 128, not '-1'"},
    {"HIRNODE_P2P_SYNC", "flag", "HIRNODE_P2P_SYNC: expected events or flags, not 'flag'"},
    {"HIRNODE_P2P_GRAPH_COPY", "sm", "HIRNODE_P2P_GRAPH_COPY: expected engine or kernel, not 'sm'"},
    {"HIRNODE_P2P_PIECES", "0", "HIRNODE_P2P_PIECES: expected an integer from 1 to 64, not '0'"},
    {"HIRNODE_P2P_AG_PIECES", "65", "HIRNODE_P2P_AG_PIECES: expected an integer from 1 to 64, not '65'"},
    {"HIRNODE_P2P_PIECE_KIB", "4M", "HIRNODE_P2P_PIECE_KIB: expected an integer from 1 to 1073741824, not '4M'"},
    {"HIRNODE_P2P_LANES", "5", "HIRNODE_P2P_LANES: expected an integer from 1 to 4, not '5'"},
    {"HIRNODE_P2P_SMALL_KIB", "-1", "HIRNODE_P2P_SMALL_KIB: expected an integer from 0 to 65536, not '-1'"},
    {"HIRNODE_FAULT", "1:17:melt", "HIRNODE_FAULT: fault '1:17:melt': expected RANK:LINE[:OCCURRENCE]:KIND[:MS] "
                                   "with KIND one of issue, async, trap, comm, stop, slow, oom, skip, kill, sigstop"},
    {"HIRNODE_WATCHDOG_GRACE_S", "-1", "HIRNODE_WATCHDOG_GRACE_S: expected a number from 0 to 1e+06, not '-1'"},
    {"HIRNODE_SPIN_US", "inf", "HIRNODE_SPIN_US: expected a number from 0 to 1e+07, not 'inf'"},
    {"HIRNODE_JOIN_SPIN", "on", "HIRNODE_JOIN_SPIN: expected 0 or 1, not 'on'"},
    {"HIRNODE_LL_PROBE", "yes", "HIRNODE_LL_PROBE: expected 0 or 1, not 'yes'"},
    {"HIRNODE_PROFILE", "a\tb.json",
     "HIRNODE_PROFILE: expected a file's path (below 4096 bytes, no control characters)"},
    {"HIRNODE_WORLD", "257", "HIRNODE_WORLD: expected an integer from 0 to 256, not '257'"},
    {"HIRNODE_RANK", "-1", "HIRNODE_RANK: expected an integer from 0 to 255, not '-1'"},
    {"HIRNODE_NODES", "0.5", "HIRNODE_NODES: expected an integer from 0 to 256, not '0.5'"},
    {"HIRNODE_HIER_ALLREDUCE", "yes", "HIRNODE_HIER_ALLREDUCE: expected auto, 1 or 0, not 'yes'"},
    {"HIRNODE_RENDEZVOUS", "/tmp/a\nb",
     "HIRNODE_RENDEZVOUS: expected a file's path (below 4096 bytes, no control characters)"},
    {"HIRNODE_STORE", "host\t:1", "HIRNODE_STORE: expected host:port (a port from 1 to 65535)"},
    {"HIRNODE_STORE", "node-a", "HIRNODE_STORE: expected host:port (a port from 1 to 65535)"},
    {"HIRNODE_STORE", "node-a:0", "HIRNODE_STORE: expected host:port (a port from 1 to 65535)"},
    {"HIRNODE_STORE", ":29500", "HIRNODE_STORE: expected host:port (a port from 1 to 65535)"},
};

/* The default's value through the getter of s's kind, and the getter's
 * status with the variable as it is. */
static hn_status_t get_by_kind(const hn_setting *s, hn_strbuf *err, char *value, size_t n)
{
    hn_status_t st = HN_ERR_INVALID;
    const char *w = NULL;
    int flag = -1;
    int64_t i = -1;
    double d = -1;
    hn_fault_plan plan;
    switch (s->kind) {
    case HN_SET_WORD: st = hn_setting_word(s->name, &w, err); snprintf(value, n, "%s", w); break;
    case HN_SET_FLAG: st = hn_setting_flag(s->name, &flag, err); snprintf(value, n, "%d", flag); break;
    case HN_SET_INT: st = hn_setting_int(s->name, &i, err); snprintf(value, n, "%lld", (long long)i); break;
    case HN_SET_NUMBER: st = hn_setting_number(s->name, &d, err); snprintf(value, n, "%g", d); break;
    case HN_SET_FAULTS: st = hn_setting_faults(s->name, &plan, err); snprintf(value, n, "%s", plan.n ? "?" : ""); break;
    case HN_SET_PATH: st = hn_setting_path(s->name, &w, err); snprintf(value, n, "%s", w); break;
    case HN_SET_ADDRESS: st = hn_setting_address(s->name, &w, err); snprintf(value, n, "%s", w); break;
    }
    return st;
}

static void test_bad_values(void)
{
    save_env();
    /* every setting has a bad value below */
    for (int i = 0; i < hn_settings_count(); i++) {
        int found = 0;
        for (int k = 0; k < HN_ARRAY_LEN(bad); k++)
            found |= strcmp(bad[k].env, hn_setting_at(i)->env) == 0;
        if (!found)
            fprintf(stderr, "\n  no bad value of %s tested", hn_setting_at(i)->env);
        CU_ASSERT_TRUE(found);
    }
    for (int k = 0; k < HN_ARRAY_LEN(bad); k++) {
        const hn_setting *s = NULL;
        hn_strbuf err, all;
        hn_runtime_config cfg, def;
        char value[64], want[64];
        for (int i = 0; i < hn_settings_count(); i++)
            if (strcmp(hn_setting_at(i)->env, bad[k].env) == 0)
                s = hn_setting_at(i);
        CU_ASSERT_PTR_NOT_NULL_FATAL(s);
        hn_runtime_config_default(&def);
        setenv(bad[k].env, bad[k].value, 1);
        hn_sb_init(&err);
        hn_sb_init(&all);
        /* the check: one line, the whole message */
        CU_ASSERT_EQUAL(hn_setting_check(s, &err), HN_ERR_INVALID);
        if (err.data == NULL || strcmp(err.data, bad[k].msg) != 0)
            fprintf(stderr, "\n  %s=%s: want '%s', got '%s'", bad[k].env, bad[k].value, bad[k].msg,
                    err.data ? err.data : "");
        CU_ASSERT_STRING_EQUAL(err.data ? err.data : "", bad[k].msg);
        CU_ASSERT_EQUAL(hn_settings_check(&all), HN_ERR_INVALID);
        CU_ASSERT(all.data != NULL && strstr(all.data, bad[k].msg) != NULL &&
                  all.data[strlen(all.data) - 1] == '\n');
        /* the getter of its kind: refused, said the same, the default meanwhile */
        hn_sb_free(&err);
        hn_sb_init(&err);
        CU_ASSERT_EQUAL(get_by_kind(s, &err, value, sizeof(value)), HN_ERR_INVALID);
        CU_ASSERT_STRING_EQUAL(err.data ? err.data : "", bad[k].msg);
        unsetenv(bad[k].env);
        CU_ASSERT_EQUAL(get_by_kind(s, NULL, want, sizeof(want)), HN_OK);
        CU_ASSERT_STRING_EQUAL(value, want);
        setenv(bad[k].env, bad[k].value, 1);
        /* the configuration keeps its defaults; the runtime refuses to start */
        hn_runtime_config_default(&cfg);
        CU_ASSERT_EQUAL(memcmp(&cfg, &def, sizeof(cfg)), 0);
        CU_ASSERT_EQUAL(create_status(), HN_ERR_INVALID);
        unsetenv(bad[k].env);
        hn_sb_free(&err);
        hn_sb_free(&all);
    }
    /* several: each said, in the table's order */
    {
        hn_strbuf all;
        hn_sb_init(&all);
        setenv("HIRNODE_P2P_LANES", "0", 1);
        setenv("HIRNODE_STREAMS", "x", 1);
        CU_ASSERT_EQUAL(hn_settings_check(&all), HN_ERR_INVALID);
        CU_ASSERT_STRING_EQUAL(all.data ? all.data : "",
                               "HIRNODE_STREAMS: expected an integer from 1 to 16, not 'x'\n"
                               "HIRNODE_P2P_LANES: expected an integer from 1 to 4, not '0'\n");
        hn_sb_free(&all);
    }
    restore_env();
}

static void test_good_values(void)
{
    hn_runtime_config cfg;
    const char *w;
    int flag;
    int64_t i;
    double d;
    hn_fault_plan plan;
    hn_strbuf err;
    save_env();
    hn_sb_init(&err);
    setenv("HIRNODE_STREAMS", "0x10", 1);
    setenv("HIRNODE_TIMEOUT", "2.5e1", 1);
    setenv("HIRNODE_HOST_DELAY_US", "20", 1);
    setenv("HIRNODE_SEED", "9223372036854775807", 1);
    setenv("HIRNODE_GRAPHS", "1", 1);
    setenv("HIRNODE_BACKEND", "host", 1);
    hn_runtime_config_default(&cfg);
    CU_ASSERT_EQUAL(cfg.ndev, 1);
    CU_ASSERT_EQUAL(cfg.nstreams, 16);
    CU_ASSERT_DOUBLE_EQUAL(cfg.timeout_s, 25.0, 1e-12);
    CU_ASSERT_DOUBLE_EQUAL(cfg.host_delay_us, 20.0, 1e-12);
    CU_ASSERT_EQUAL(cfg.seed, (uint64_t)INT64_MAX);
    CU_ASSERT_EQUAL(cfg.graphs, 1);
    CU_ASSERT_STRING_EQUAL(cfg.backend, "host");
    setenv("HIRNODE_P2P_SYNC", "flags", 1);
    CU_ASSERT_EQUAL(hn_setting_word("p2p_sync", &w, &err), HN_OK);
    CU_ASSERT_STRING_EQUAL(w, "flags");
    setenv("HIRNODE_JOIN_SPIN", "0", 1);
    CU_ASSERT_EQUAL(hn_setting_flag("join_spin", &flag, &err), HN_OK);
    CU_ASSERT_EQUAL(flag, 0);
    setenv("HIRNODE_AUTO_LL", "1", 1);
    CU_ASSERT_EQUAL(hn_setting_word("auto_ll", &w, &err), HN_OK);
    CU_ASSERT_STRING_EQUAL(w, "1");
    setenv("HIRNODE_P2P_PIECE_KIB", "64", 1);
    CU_ASSERT_EQUAL(hn_setting_int("p2p_piece_kib", &i, &err), HN_OK);
    CU_ASSERT_EQUAL(i, 64);
    setenv("HIRNODE_SPIN_US", "0", 1);
    CU_ASSERT_EQUAL(hn_setting_number("spin_us", &d, &err), HN_OK);
    CU_ASSERT_DOUBLE_EQUAL(d, 0.0, 0);
    setenv("HIRNODE_FAULT", "1:17:async,0:3:2:slow:5", 1);
    CU_ASSERT_EQUAL(hn_setting_faults("fault", &plan, &err), HN_OK);
    CU_ASSERT_EQUAL(plan.n, 2);
    CU_ASSERT_EQUAL(plan.f[1].kind, HN_FAULT_SLOW);
    CU_ASSERT_PTR_NULL(err.data); /* nothing said */
    CU_ASSERT_EQUAL(hn_settings_check(&err), HN_OK);
    /* a getter of another kind, or no such setting */
    CU_ASSERT_EQUAL(hn_setting_int("p2p_sync", &i, &err), HN_ERR_INVALID);
    CU_ASSERT_EQUAL(hn_setting_word("nothing", &w, NULL), HN_ERR_INVALID);
    hn_sb_free(&err);
    restore_env();
}

static void test_runtime_settings(void)
{
    hn_runtime_settings set;
    hn_strbuf err;
    save_env();
    hn_sb_init(&err);
    setenv("HIRNODE_HOST_MEM_MIB", "64", 1);
    setenv("HIRNODE_SPIN_US", "12.5", 1);
    setenv("HIRNODE_WATCHDOG_GRACE_S", "2", 1);
    setenv("HIRNODE_JOIN_SPIN", "0", 1);
    setenv("HIRNODE_REPLAY", "jobs", 1);
    setenv("HIRNODE_FAULT", "0:3:stop,3:4:issue", 1);
    CU_ASSERT_EQUAL(hn_settings_read_runtime(4, &set, &err), HN_OK);
    CU_ASSERT_EQUAL(set.host_mem_bytes, (size_t)64 << 20);
    CU_ASSERT_DOUBLE_EQUAL(set.spin_us, 12.5, 0);
    CU_ASSERT_DOUBLE_EQUAL(set.watchdog_grace_s, 2.0, 0);
    CU_ASSERT_EQUAL(set.join_spin, 0);
    CU_ASSERT_STRING_EQUAL(set.replay, "jobs");
    CU_ASSERT_EQUAL(set.faults.n, 2);
    /* a fault on a rank the runtime will not have */
    CU_ASSERT_EQUAL(hn_settings_read_runtime(3, &set, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data ? err.data : "",
                           "HIRNODE_FAULT: fault '3:4:issue': rank 3 does not exist (ranks 0 to 2)\n");
    hn_sb_free(&err);
    hn_sb_init(&err);
    setenv("HIRNODE_FAULT", "1:4:2:slow:50", 1);
    CU_ASSERT_EQUAL(hn_settings_read_runtime(1, &set, &err), HN_ERR_INVALID);
    CU_ASSERT_STRING_EQUAL(err.data ? err.data : "",
                           "HIRNODE_FAULT: fault '1:4:2:slow:50': rank 1 does not exist (the only rank is 0)\n");
    CU_ASSERT_EQUAL(create_status(), HN_OK); /* 2 ranks have rank 1 */
    setenv("HIRNODE_FAULT", "2:4:issue", 1);
    CU_ASSERT_EQUAL(create_status(), HN_ERR_INVALID);
    hn_sb_free(&err);
    restore_env();
}

void hn_suite_settings(void)
{
    static CU_TestInfo tests[] = {
        {"the table: names, defaults, empty variables", test_table},
        {"every bad variable: its message; the runtime refuses to start", test_bad_values},
        {"good values through every getter and the configuration", test_good_values},
        {"what the runtime reads; faults on ranks it lacks", test_runtime_settings},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("base/settings", tests);
}
