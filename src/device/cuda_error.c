/* Which devices lost their CUDA context, and to what error: written by
 * every CUDA call's check (cuda_check.h) in the device backend, the
 * compute ops and the kernels' launches, read by the device backend's
 * health. Below all of them: it calls nothing of theirs. */
#include "cuda_check.h"

/* Per device: the sticky CUDA error that lost its context, 0 while none. */
#define MAX_DEVICES 256
static int lost_error[MAX_DEVICES];

int hn_cuda_note_error(cudaError_t e)
{
    int dev = -1;
    switch (e) {
    case cudaErrorIllegalAddress:
    case cudaErrorAssert:
    case cudaErrorHardwareStackError:
    case cudaErrorIllegalInstruction:
    case cudaErrorMisalignedAddress:
    case cudaErrorInvalidAddressSpace:
    case cudaErrorInvalidPc:
    case cudaErrorLaunchFailure:
    case cudaErrorECCUncorrectable:
        break;
    default:
        return 0;
    }
    if (cudaGetDevice(&dev) == cudaSuccess && dev >= 0 && dev < MAX_DEVICES &&
        __atomic_exchange_n(&lost_error[dev], (int)e, __ATOMIC_ACQ_REL) != 0)
        return 2;
    return 1;
}

cudaError_t hn_cuda_lost_error(int dev)
{
    return dev >= 0 && dev < MAX_DEVICES ? (cudaError_t)__atomic_load_n(&lost_error[dev], __ATOMIC_ACQUIRE)
                                         : cudaSuccess;
}
