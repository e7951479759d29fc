"""Numbers as a page writes them for a class: 2–3 significant digits, never '0.0e+00' or '13.4000'.
No Streamlit here."""

from __future__ import annotations

import math

SUPERSCRIPT = str.maketrans("-0123456789", "⁻⁰¹²³⁴⁵⁶⁷⁸⁹")
ZERO = 1e-12  # below this a figure is float rounding: it reads 0


def figure(value: float, digits: int = 3) -> str:
    """13.4 -> '13.4', 1234.5 -> '1,234', 0.000021 -> '2.1 × 10⁻⁵', 0 (or float rounding) -> '0'."""
    if abs(value) < ZERO:
        return "0"
    if 1 <= abs(value) < 1e9:  # whole digits are never cut: a count reads as a count
        return f"{value:,.{max(0, digits - 1 - math.floor(math.log10(abs(value))))}f}"
    text = f"{value:.{digits}g}"
    if "e" not in text:
        return text
    mantissa, exponent = text.split("e")
    return f"{mantissa} × 10{str(int(exponent)).translate(SUPERSCRIPT)}"


def p_value(value: float) -> str:
    """A test's p-value: two digits, or '< 0.001' below that (a smaller one says nothing more here)."""
    return "< 0.001" if value < 1e-3 else f"{value:.2g}"
