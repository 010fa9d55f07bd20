"""hirnode from Python: a thin layer over libhirnode (ctypes, the C API of include/hirnode/runtime.h).

    import hirnode, numpy as np
    prog = hirnode.Program.parse(text, "step.hir")
    with hirnode.Runtime(ranks=2, backend="host") as rt:
        rt.run(prog, {"X": [x0, x1], "Y": [y0, y1]})       # one tensor per rank, bound without copies

Tensors: torch tensors, NumPy arrays (host backend), hirnode Buffers, anything with __dlpack__,
__cuda_array_interface__ or __array_interface__; each checked against the program's io list
(dtype, shape, device, contiguity) before the C call. Errors are hirnode.Error subclasses
carrying the library's message. The library is found through $HIRNODE_LIBRARY, next to this
package, the repository's build/, then the system's (hirnode.library_path says which).
"""

from . import _lib
from .errors import (AbortedError, BindingError, ClosedError, DeadlineError, DeviceError, DeviceLostError, Error,
                     ExecutionError, FileError, InvalidArgumentError, MismatchError, OutOfMemoryError, ParseError,
                     PeerLostError, UnsupportedError, VerifyError)
from .runtime import IO, Buffer, Graph, Program, Runtime, Stream, current_streams

__version__ = _lib.hn_version().decode()
library_path = _lib.path

__all__ = ["Runtime", "Program", "Graph", "Stream", "Buffer", "IO", "current_streams", "Error", "BindingError",
           "ClosedError", "InvalidArgumentError", "OutOfMemoryError", "ParseError", "VerifyError", "ExecutionError",
           "DeadlineError", "MismatchError", "UnsupportedError", "FileError", "AbortedError", "DeviceError",
           "DeviceLostError", "PeerLostError", "library_path", "__version__"]
