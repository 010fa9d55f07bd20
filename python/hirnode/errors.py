"""hirnode's exceptions: one class per hn_status_t, carrying the library's message."""

from . import _lib


class Error(Exception):
    """A failed hirnode call. `status` is the hn_status_t (negative), `message` the library's text:
    `file:line:col: error: ...` for programs, the failing rank and instruction for runs."""

    status = None

    def __init__(self, message, status=None):
        if status is not None:
            self.status = status
        self.message = message
        super().__init__(message)

    @property
    def status_string(self):
        return _lib.status_string(self.status) if self.status is not None else "error"


class OutOfMemoryError(Error, MemoryError):
    status = _lib.ERR_NOMEM


class InvalidArgumentError(Error, ValueError):
    status = _lib.ERR_INVALID


class BindingError(InvalidArgumentError):
    """A tensor that does not fit the program's io list (dtype, shape, device, contiguity),
    found before the C call; `name` and `rank` say which binding."""

    def __init__(self, message, name=None, rank=None):
        self.name = name
        self.rank = rank
        super().__init__(message)


class ClosedError(InvalidArgumentError):
    """A call on a closed runtime, program, graph, stream or buffer."""


class ParseError(Error):
    status = _lib.ERR_PARSE


class VerifyError(Error):
    status = _lib.ERR_VERIFY


class ExecutionError(Error):
    """An instruction failed while running (HN_ERR_RUNTIME)."""
    status = _lib.ERR_RUNTIME


class DeadlineError(Error, TimeoutError):
    status = _lib.ERR_TIMEOUT


class MismatchError(Error):
    status = _lib.ERR_MISMATCH


class UnsupportedError(Error):
    status = _lib.ERR_UNSUPPORTED


class FileError(Error, OSError):
    status = _lib.ERR_IO


class AbortedError(Error):
    status = _lib.ERR_ABORTED


class DeviceError(Error):
    status = _lib.ERR_DEVICE


class DeviceLostError(DeviceError):
    status = _lib.ERR_DEVICE_LOST


class PeerLostError(Error):
    """A process of the world died: the runtime cannot run again (close it)."""
    status = _lib.ERR_PEER_LOST


_BY_STATUS = {c.status: c for c in (OutOfMemoryError, InvalidArgumentError, ParseError, VerifyError, ExecutionError,
                                     DeadlineError, MismatchError, UnsupportedError, FileError, AbortedError,
                                     DeviceError, DeviceLostError, PeerLostError)}


def error(status, message=None):
    """The exception for a status, with the library's message (the status's text when there is none)."""
    text = (message or "").rstrip("\n") or _lib.status_string(status)
    cls = _BY_STATUS.get(status)
    return cls(text) if cls is not None else Error(text, status)
