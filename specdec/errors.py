"""The one exception type users see: its message is shown as is, in the CLI and in the app."""


class SpecDecError(Exception):
    """A problem with the user's input or environment, explained in one line."""


def first_line(error: BaseException) -> str:
    """An unexpected error's first line (or its type's name): enough to say what failed, in one line."""
    return (str(error).strip().splitlines() or [type(error).__name__])[0]


def is_out_of_memory(error: BaseException) -> bool:
    """A GPU's torch.OutOfMemoryError or the host's MemoryError (no torch import: the CLI starts fast)."""
    return isinstance(error, MemoryError) or type(error).__name__ == "OutOfMemoryError"


def out_of_memory_message(error: BaseException, doing: str = "running the models") -> str:
    """One line for an out-of-memory error, anywhere (load, move, round), with what to try."""
    where = "the host" if isinstance(error, MemoryError) else "the GPU"
    return (f"out of memory on {where} while {doing}: try a smaller pair, fewer new tokens (or a smaller "
            "batch), or the CPU (start with CUDA_VISIBLE_DEVICES= to hide the GPU)")
