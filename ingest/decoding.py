"""Bytes of a text file to `str`: byte-order mark, UTF-8, the document's declaration, detection.

In that order:

1. a byte-order mark (UTF-8, UTF-16 or UTF-32) decides, and is dropped;
2. bytes that are valid UTF-8 are UTF-8 (a stale declaration on a UTF-8 file is common;
   legacy text that happens to be valid UTF-8 is not);
3. the charset the document declares (an HTML `<meta charset>` or `http-equiv`
   content type, or an XML declaration), when Python knows it and it decodes the bytes;
4. detection by charset-normalizer, preferring windows-1252 when it is about as
   plausible as the best guess (undeclared legacy text is most often Western, and
   short samples of it are easily mistaken for another Latin code page).

Bytes with NULs that are not UTF-16/32 are binary data, not text. Whatever cannot be
decoded raises `UndecodableError` with a message fit for a summary line.
"""

from __future__ import annotations

import codecs
import re

# UTF-32 first: its little-endian mark begins with UTF-16's.
_BOMS = (
    (codecs.BOM_UTF32_LE, "utf-32-le"),
    (codecs.BOM_UTF32_BE, "utf-32-be"),
    (codecs.BOM_UTF8, "utf-8"),
    (codecs.BOM_UTF16_LE, "utf-16-le"),
    (codecs.BOM_UTF16_BE, "utf-16-be"),
)
# Browsers read these labels as windows-1252 (WHATWG Encoding Standard), and so do
# the documents that carry them: their 0x80-0x9F bytes are curly quotes and dashes.
_WINDOWS_1252_LABELS = frozenset({"iso-8859-1", "iso8859-1", "latin1", "latin-1", "us-ascii"})
# How far a declaration is looked for, as browsers do (the first 1024 bytes).
_PRESCAN_BYTES = 1024
_XML_DECLARATION = re.compile(rb"""\A<\?xml[^>]*?\bencoding\s*=\s*["']([A-Za-z0-9._:-]+)["']""")
_META_TAG = re.compile(rb"<meta\b[^>]*>", re.IGNORECASE)
_CHARSET_ATTRIBUTE = re.compile(rb"""\bcharset\s*=\s*["']?\s*([A-Za-z0-9._:-]+)""", re.IGNORECASE)
# Chaos (charset-normalizer's 0-1 mess ratio) within which windows-1252 beats the best guess.
_WINDOWS_1252_MARGIN = 0.05


class UndecodableError(ValueError):
    """The bytes are not text in any encoding that could be found; the message says why."""


def decode_text(raw: bytes, *, markup: bool = False) -> str:
    """The text of `raw`; `markup` looks for an HTML/XML charset declaration first."""
    for bom, encoding in _BOMS:
        if raw.startswith(bom):
            return _after_bom(raw, len(bom), encoding)
    if b"\x00" not in raw:
        try:
            return raw.decode("utf-8")
        except UnicodeDecodeError:
            pass
        declared = declared_charset(raw) if markup else None
        if declared is not None:
            text = _try_declared(raw, declared)
            if text is not None:
                return text
    return _detect(raw)


def declared_charset(raw: bytes) -> str | None:
    """The charset an HTML or XML document names in its first 1024 bytes, if any."""
    head = raw[:_PRESCAN_BYTES]
    xml = _XML_DECLARATION.match(head)
    if xml:
        return xml.group(1).decode("ascii").lower()
    for meta in _META_TAG.finditer(head):
        charset = _CHARSET_ATTRIBUTE.search(meta.group(0))
        if charset:
            return charset.group(1).decode("ascii").lower()
    return None


def _try_declared(raw: bytes, label: str) -> str | None:
    """`raw` decoded as declared, or None when the label is unknown or does not fit the bytes."""
    candidates = ["cp1252", "latin-1"] if label in _WINDOWS_1252_LABELS else [label]
    for encoding in candidates:
        try:
            if codecs.lookup(encoding).name.startswith(("utf-16", "utf-32")):
                return None  # a declaration cannot name these: it would not be readable
            return raw.decode(encoding)
        except (LookupError, UnicodeDecodeError):
            continue
    return None


def _detect(raw: bytes) -> str:
    from charset_normalizer import from_bytes

    matches = list(from_bytes(raw))
    if not matches:
        raise UndecodableError(_binary_or_unknown(raw))
    best = matches[0]
    if b"\x00" in raw and not best.encoding.startswith(("utf_16", "utf_32")):
        raise UndecodableError(_binary_or_unknown(raw))
    for match in matches:
        if match.chaos > best.chaos + _WINDOWS_1252_MARGIN:
            break
        if "cp1252" in match.could_be_from_charset:
            return str(match)
    return str(best)


def _binary_or_unknown(raw: bytes) -> str:
    if b"\x00" in raw:
        return "binary data, not text (it holds NUL bytes)"
    return (
        "not text in any encoding that could be recognised (not UTF-8, no charset "
        "declaration, detection failed); save the file as UTF-8"
    )


def _after_bom(raw: bytes, bom_length: int, encoding: str) -> str:
    try:
        return raw[bom_length:].decode(encoding)
    except UnicodeDecodeError as error:
        raise UndecodableError(
            f"not valid {encoding.upper()} at byte {bom_length + error.start}, "
            "as its byte-order mark says"
        ) from None
