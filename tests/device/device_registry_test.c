/* Tests of src/device/device_registry.c and of what each backend's table
 * says it is (hn_device_ops: kind, emulated, default_via_auto,
 * visible_env, comm): the layers above read these, never a backend's
 * name, so each is pinned here. */
#include <string.h>

#include "comm/comm.h"
#include "device/device.h"
#include "../test.h"

/* Every registered backend is found by its name, has its compute ops and a
 * communicator, and is a backend hirnode knows; `auto` has an emulated one
 * to fall back to. */
static void test_registered(void)
{
    const hn_device_ops *const *all = hn_device_backends();
    int emulated = 0, n = 0;
    for (int i = 0; all[i] != NULL; i++, n++) {
        const hn_device_ops *d = all[i];
        CU_ASSERT_PTR_EQUAL(hn_device_find(d->name), d);
        CU_ASSERT_PTR_NOT_NULL(hn_device_compute(d));
        CU_ASSERT_TRUE(hn_device_name_known(d->name));
        CU_ASSERT_PTR_NOT_NULL(d->comm);
        CU_ASSERT_PTR_NOT_NULL(hn_comm_find(d->comm)); /* `via default` and `via nccl` take it */
        CU_ASSERT(d->kind == HN_DEVICE_KIND_HOST || d->kind == HN_DEVICE_KIND_CUDA);
        CU_ASSERT(d->emulated == 0 || d->emulated == 1);
        CU_ASSERT(d->default_via_auto == 0 || d->default_via_auto == 1);
        if (d->emulated) {
            emulated++;
            CU_ASSERT_PTR_NULL(d->visible_env); /* no driver numbers its devices */
            CU_ASSERT(d->device_count() >= 256); /* any number of ranks */
        }
    }
    CU_ASSERT(n >= 1);
    CU_ASSERT(emulated >= 1);
    CU_ASSERT_PTR_NULL(hn_device_find("nonesuch"));
    CU_ASSERT_PTR_NULL(hn_device_find(NULL));
    CU_ASSERT_PTR_NULL(hn_device_compute(NULL));
}

/* The names of every backend, built here or not: a CUDA=0 build still
 * knows "cuda" (a profile measured on GPUs names it). */
static void test_known_names(void)
{
    const char *const *names = hn_device_known_names();
    int n = 0;
    CU_ASSERT_TRUE(hn_device_name_known("cuda"));
    CU_ASSERT_TRUE(hn_device_name_known("host"));
    CU_ASSERT_FALSE(hn_device_name_known("tpu"));
    CU_ASSERT_FALSE(hn_device_name_known("auto")); /* a choice, not a backend */
    CU_ASSERT_FALSE(hn_device_name_known(""));
    CU_ASSERT_FALSE(hn_device_name_known(NULL));
    for (; names[n] != NULL; n++)
        CU_ASSERT_TRUE(hn_device_name_known(names[n]));
    CU_ASSERT_EQUAL(n, 2);
}

/* The host backend: the CPU emulation. */
static void test_host_table(void)
{
    const hn_device_ops *d = &hn_device_host;
    CU_ASSERT_STRING_EQUAL(d->name, "host");
    CU_ASSERT_STRING_EQUAL(d->comm, "host");
    CU_ASSERT_EQUAL(d->kind, HN_DEVICE_KIND_HOST);
    CU_ASSERT_EQUAL(d->emulated, 1);
    CU_ASSERT_EQUAL(d->default_via_auto, 0); /* collectives without `via` stay on the CPU communicator */
    CU_ASSERT_PTR_NULL(d->visible_env);
    CU_ASSERT_PTR_NOT_NULL(d->share);
    CU_ASSERT_PTR_NULL(d->describe); /* no GPU model: the name stands for it */
    CU_ASSERT_EQUAL((int)HN_DEVICE_KIND_HOST, 1); /* DLPack's kDLCPU */
}

/* The CUDA backend, where this build has it (its table, not its devices:
 * no GPU needed). */
static void test_cuda_table(void)
{
#ifdef HN_HAVE_CUDA
    const hn_device_ops *d = &hn_device_cuda;
    CU_ASSERT_STRING_EQUAL(d->name, "cuda");
    CU_ASSERT_STRING_EQUAL(d->comm, "nccl");
    CU_ASSERT_EQUAL(d->kind, HN_DEVICE_KIND_CUDA);
    CU_ASSERT_EQUAL(d->emulated, 0);
    CU_ASSERT_EQUAL(d->default_via_auto, 1);
    CU_ASSERT_STRING_EQUAL(d->visible_env, "CUDA_VISIBLE_DEVICES");
    CU_ASSERT_PTR_NOT_NULL(d->share);
    CU_ASSERT_PTR_NOT_NULL(d->describe);
    CU_ASSERT_PTR_EQUAL(hn_device_backends()[0], d); /* `auto` tries it first */
#else
    CU_ASSERT_PTR_NULL(hn_device_find("cuda"));
#endif
    CU_ASSERT_EQUAL((int)HN_DEVICE_KIND_CUDA, 2); /* DLPack's kDLCUDA */
}

void hn_suite_device_registry(void)
{
    static CU_TestInfo tests[] = {
        {"every registered backend: found by name, compute ops, communicator, known", test_registered},
        {"the names of every backend, built here or not", test_known_names},
        {"the host backend's table says what it is", test_host_table},
        {"the cuda backend's table says what it is", test_cuda_table},
        CU_TEST_INFO_NULL,
    };
    hn_test_add_suite("device/device_registry", tests);
}
