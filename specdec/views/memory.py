"""The Variants page's line on the server's memory: what each load added, and what an exit counts as its
own. No Streamlit here."""

from __future__ import annotations

from specdec.model_names import NGRAM


def memory_line(added: dict[str, int], target: str, own: dict[str, int] | None = None) -> str:
    """What each load added to this server's resident memory, as measured when it loaded, and, for a
    drafter that counts them, the bytes of its own tensors."""
    if target not in added:
        return ""
    own = own or {}

    def drafter(name: str, size: int) -> str:
        counted = f" (its own tensors: {own[name] / 2**20:,.0f} MiB)" if name in own else ""
        return f"{name} +{size / 2**20:,.0f} MiB{counted}"

    parts = [f"the target {added[target] / 2**20:,.0f} MiB"] + [
        drafter(name, size) for name, size in added.items() if name not in (target, NGRAM)]
    return ("**Memory on this server**, the resident size measured before and after each load: "
            + "; ".join(parts) + ". Read while other sessions run, a load's figure can be some MiB off. "
            "A count of a drafter's own tensors is exact. "
            "A drafter not loaded here yet is not listed; race it to measure it.")
