"""A class's code and key, and the links that carry them.

The code is what students type or hear: six characters from an alphabet with no look-alikes (no 0/O,
1/I/L, 5/S, 2/Z, 8/B), read aloud in two groups of three. It is not a secret. The key is: 128 random
bits, kept in the store only as its SHA-256, compared in constant time.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from pathlib import Path
from urllib.parse import urlencode, urlsplit, urlunsplit

from specdec.errors import SpecDecError

CODE_ALPHABET = "ACDEFGHJKMNPQRTUVWXY34679"
CODE_LENGTH = 6
MAX_CODE_INPUT = 20  # what a typed code may be before it is cleaned (spaces, dashes, lower case)
KEY_BYTES = 16
KEY_PATTERN = re.compile(r"[A-Za-z0-9_-]{22}")


def new_code() -> str:
    return "".join(secrets.choice(CODE_ALPHABET) for _ in range(CODE_LENGTH))


def new_key() -> str:
    return secrets.token_urlsafe(KEY_BYTES)


def key_hash(key: str) -> str:
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


def key_matches(key: str | None, stored_hash: str) -> bool:
    """The key given is the class's, compared in constant time (its hash against the stored one)."""
    if not isinstance(key, str) or not KEY_PATTERN.fullmatch(key):
        return False
    return hmac.compare_digest(key_hash(key), stored_hash)


def clean_code(text: str | None) -> str:
    """A typed or linked code as stored ('kx7 4pm' -> 'KX74PM'), or SpecDecError in one line."""
    if not isinstance(text, str) or not text.strip():
        raise SpecDecError("no class code given")
    if len(text) > MAX_CODE_INPUT:
        raise SpecDecError(f"a class code has {CODE_LENGTH} characters, not {len(text)}")
    code = re.sub(r"[\s-]", "", text).upper()
    if len(code) != CODE_LENGTH or any(c not in CODE_ALPHABET for c in code):
        raise SpecDecError(f"{text.strip()!r} is not a class code: {CODE_LENGTH} letters and digits, "
                           "as the instructor's screen shows it")
    return code


def spoken(code: str) -> str:
    """The code as said or shown to a room: 'KX7 4PM'."""
    return f"{code[:3]} {code[3:]}"


def class_links(base_url: str, code: str, key: str) -> tuple[str, str]:
    """(student link, instructor link) on the server at `base_url`. The student's carries the code
    alone; the instructor's the key too (the app takes it out of the address bar once read)."""
    parts = urlsplit(base_url.strip())
    if parts.scheme not in ("http", "https") or not parts.netloc:
        raise SpecDecError(f"--base-url {base_url!r}: expected http(s)://HOST[:PORT][/PATH], "
                           "the address students open")
    path = parts.path or "/"

    def link(params: dict[str, str]) -> str:
        return urlunsplit((parts.scheme, parts.netloc, path, urlencode(params), ""))

    return link({"class": code}), link({"class": code, "key": key})


def write_qr(link: str, path: Path) -> Path:
    """A QR code of `link` as a PNG, large enough to scan from the back of a room."""
    import qrcode  # only `class open` draws one

    image = qrcode.make(link, box_size=12, border=2)
    path.parent.mkdir(parents=True, exist_ok=True)
    image.save(path)
    return path
