"""Technical tokens: the parts of technical text that look like PII to a pattern and are not.

Release notes, changelogs, logs and manuals are full of strings that share a shape with
personal data: a four-part version (`3.5.25.3`) is a valid IPv4 address, a timezone offset
after a time (`13:15:04 -0400`) or a Debian version (`0~20200225.2-4`) parses as a phone
number, a commit id is a run of digits. None of them identifies anyone. This module finds
them, so the recognizers can leave them alone:

- `technical_spans` lists the tokens whose digits no phone number shares: date-times with
  their offsets, version strings, commit ids, issue and CVE ids. The phone pass runs on
  the text with these blanked out, as it already does with card numbers and IBANs.
- `reads_as_version` tells whether a dotted quad found as an IPv4 address is written as a
  version: joined to a version's other parts (`1:0.2.2.2-3`, `djvulibre-3.5.25.3-cflags`,
  `v1.2.3.4`) or named as one (`Standards-Version 4.6.0.0`, `version 1.2.5.1`).
- `is_code_like` tells whether a word is an identifier (`libbrotli-dev`, `core.editor`,
  `--prune=now`, `WINESERVER`), which no name is.

Nothing here depends on a product's vocabulary: the rules read the shape of a token and
the words a text uses to introduce a version.
"""

from __future__ import annotations

import re
from collections.abc import Iterator

_MONTHS = r"(?:Jan|Feb|Mar|Apr|May|Jun|Jul|Aug|Sep|Oct|Nov|Dec)[a-z]*"
_DAYS = r"(?:Mon|Tue|Wed|Thu|Fri|Sat|Sun)[a-z]*"
_TIME = r"\d{1,2}:\d{2}(?::\d{2}(?:[.,]\d+)?)?"
_OFFSET = r"(?:[+-]\d{2}:?\d{2}|Z|UTC|GMT)"
_TECHNICAL = re.compile(
    "|".join(
        (
            # RFC 2822 dates (mail, changelogs): Fri, 01 Sep 2017 13:15:04 -0400
            rf"(?:{_DAYS},?\s+)?\d{{1,2}}\s+{_MONTHS}\s+\d{{4}}(?:\s+{_TIME}(?:\s*{_OFFSET})?)?",
            # ISO 8601: 2024-03-01, 2024-03-01T10:00:00+02:00, 2024-03-01 10:00 -0400
            rf"\b\d{{4}}-\d{{2}}-\d{{2}}(?:[T ]{_TIME}(?:\s?{_OFFSET})?)?",
            # a time with its offset: 13:15:04 -0400, 10:00+0200
            rf"\b{_TIME}\s?[+-]\d{{2}}:?\d{{2}}\b",
            # CVE and similar ids; issue, bug and pull-request numbers
            r"\b(?:CVE|GHSA|CWE|DSA|DLA|USN|RHSA|BZ|LP)[-: ]?[\w-]*\d[\w-]*",
            r"(?:#|\bbug\s?#?|\bissue\s?#?|\bPR\s?#?|\bgh-|!)\d+\b",
            # hex commit ids with at least one letter and one digit, 7 to 64 characters
            r"\b(?=[0-9a-f]*[a-f])(?=[0-9a-f]*\d)[0-9a-f]{7,64}\b",
            # a commit or merge named as such, whatever its digits
            r"(?i:\b(?:commit|merge|rev(?:ision)?|changeset|sha)\s+[0-9a-f]{6,64})\b",
            # version strings: dotted numbers joined by ~ + : - or letters (1:9.0p1-1,
            # 0~20200225.2-4, 3.1-20210522-1~exp1, 2.2.0+dfsg, v1.2.3)
            r"(?<![\w.])v?\d+(?:[:.~+_-]\w+)*[.~+][\w.~+:-]*\w",
        )
    )
)
#: A version string: a dotted number of two or more parts, maybe with a tail.
_VERSION_PARTS = re.compile(r"\d+(?:\.\d+)+")
#: Words that introduce a version a few words later.
_VERSION_WORDS = re.compile(
    r"(?i)\W*(?:version|release|releases|upgrade|upgraded|update|updated|bump|bumped|"
    r"standards-version|v|ver|rev|tag|tagged)\W*"
)
_QUAD = re.compile(r"\d{1,3}(?:\.\d{1,3}){3}")
_LETTER = re.compile(r"[^\W\d_]")
#: A major version below 10: addresses people write rarely start so (`8.8.8.8` aside,
#: which follows a word like `server` or `dns`).
_SMALL_MAJOR = re.compile(r"\d\.")
#: Words after which a dotted quad is an address, whatever else the line says.
_ADDRESS_WORDS = frozenset(
    """at on to from via ip ipv4 address addresses addr host hostname server servers proxy
    gateway dns nameserver listen listens bind binds connect connects ping peer client
    router is was and or of as by with like e.g. i.e. the an a""".split()
)
#: What joins a version's parts to the quad: an epoch (`1:`), a prefix (`v`, `name-`).
_JOINED_BEFORE = re.compile(r"(?:\d:|[~+_-]|\bv|[A-Za-z]-?)$")
_JOINED_AFTER = re.compile(r"^(?:[~+_]|-\d+(?!\.\d)|-[A-Za-z]|\.\d|[A-Za-z])")
#: Digits in groups of two to four, nine or more in all: how phone numbers are written
#: with dots (`555.123.4567`, `01.23.45.67.89`), never how versions are.
_PHONE_SHAPE = re.compile(r"^\+?\(?\d{2,4}\)?(?:[ .-]?\d{2,4}){2,}$")
_IDENTIFIER = re.compile(
    r"""(?x)
    ^-{1,2}\w             # an option: -v, --prune=now
    | [=/\\_@`{}<>|$]     # a path, an assignment, an attribute, a code span
    | \w\.\w              # a dotted key or a file name: core.editor, gl.pc
    | ^[a-z0-9]+(?:-[a-z0-9]+)+-?$  # a lower-case hyphenated name: libbrotli-dev, xorg-sgm-
    | ^[a-z]+[A-Z]        # camelCase: untrackedCache, getName
    | \d
    """
)
#: What no name holds: digits, or the punctuation of paths, options, keys and code.
_NOT_IN_NAMES = re.compile(r"[\d=/\\_@`{}<>|$]|^-|\w\.\w{2}")


def technical_spans(text: str) -> Iterator[tuple[int, int]]:
    """[start, end) of each date-time, version, commit, issue or CVE id in `text`, in order.

    A token that has exactly a phone number's shape (`555.123.4567`) is not one of them.
    """
    for match in _TECHNICAL.finditer(text):
        token = match.group()
        if _PHONE_SHAPE.match(token) and sum(ch.isdigit() for ch in token) >= 9:
            continue
        yield match.start(), match.end()


def reads_as_version(text: str, start: int, end: int) -> bool:
    """Whether the dotted quad `text[start:end]` is written as a version, not an address
    (anything else found as an IP address, IPv6 included, is not)."""
    if _QUAD.fullmatch(text, start, end) is None:
        return False
    before, after = text[max(0, start - 40) : start], text[end : end + 12]
    joined = bool(_JOINED_BEFORE.search(before) or _JOINED_AFTER.match(after))
    # `name (1.2.5.1)` in a changelog's heading
    bracketed = before.endswith("(") or after.startswith(")")
    return joined or bracketed or _named_as_version(text, start, before)


def _named_as_version(text: str, start: int, before: str) -> bool:
    """Whether the words before a quad name it a version (`Standards-Version 4.6.0.0`) or
    name what it versions (`p11-kit 0.23.16.1`, `Git 2.43.0.1`: a one-digit major)."""
    line = before.rsplit("\n", 1)[-1]
    words = line.split()
    if not words or not line.endswith(" "):
        return False
    if any(_VERSION_WORDS.fullmatch(word) for word in words[-3:]):
        return True
    named = words[-1].strip("\"'`*_")
    if named.casefold().strip(":=") in _ADDRESS_WORDS:
        return False
    names_a_thing = named[:1].isupper() or (is_code_like(named) and _LETTER.search(named))
    return bool(names_a_thing) and _SMALL_MAJOR.match(text, start) is not None


#: The parts SSH's names of algorithms are made of (RFC 4251 §6 and IANA's SSH registry:
#: key types, ciphers, MACs, key exchanges), and numbers.
_SSH_ALGORITHM_PARTS = frozenset(
    """ssh sk cert v00 v01 rsa dsa dss ecdsa ed25519 ed448 nistp256 nistp384 nistp521 sha1
    sha2 sha256 sha384 sha512 md5 ripemd160 hmac umac etm aes128 aes192 aes256 gcm ctr cbc
    chacha20 poly1305 curve25519 curve448 sntrup761x25519 mlkem768x25519 diffie hellman
    group1 group14 group16 group18 exchange kex webauthn x509v3 zlib""".split()
)


def names_an_algorithm(address: str) -> bool:
    """Whether `local@domain` is an SSH name of an algorithm or an extension
    (`sk-ssh-ed25519@openssh.com`, `chacha20-poly1305@openssh.com`), which SSH qualifies by
    its owner's domain the way a mailbox is written (RFC 4251 §6): every hyphen-joined part
    of the local part is an algorithm's or a number."""
    local = address.partition("@")[0]
    parts = local.split("-")
    return len(parts) > 1 and all(
        part.isdigit() or part.casefold() in _SSH_ALGORITHM_PARTS for part in parts
    )


def follows_an_at_sign(text: str, start: int) -> bool:
    """Whether `start` follows an `@`: what an address pattern finds there is the tail of a
    string with two (`a@b@c.com`), which is no address."""
    return text[start - 1 : start] == "@"


def opens_call_arguments(text: str, start: int) -> bool:
    """Whether what starts at `start` is the first argument of a call in code
    (`IPv4Address(3232235521)`): after a bracket joined to the name before it, which a
    phone number's area code never is."""
    bracket = start if text.startswith("(", start) else start - 1
    if bracket < 1 or text[bracket] != "(":
        return False
    return _CALLED_NAME.search(text, max(0, bracket - 80), bracket) is not None


#: The name a call's bracket is joined to: an identifier, maybe dotted (`ipaddress.ip_address`).
_CALLED_NAME = re.compile(r"(?<![\w.])[A-Za-z_][\w.]*$")


def is_code_like(word: str) -> bool:
    """Whether `word` is written as an identifier (option, path, key, package, constant)."""
    return _IDENTIFIER.search(word.strip(".,;:!?()[]\"'")) is not None


#: Above this share of words written as identifiers, or with list items, a text is
#: technical: changelogs, manuals and logs sit well above it, running prose below.
PROSE_CODE_SHARE = 0.1
_BULLET = re.compile(r"(?m)^[ \t]*[*+\-\u2022][ \t]")


def reads_as_prose(text: str) -> bool:
    """Whether `text` is running prose: few words written as identifiers (plain numbers,
    years and amounts aside), not a list of items, and not a block of header fields
    (package metadata, mail or HTTP headers: `Classifier: License :: OSI Approved`)."""
    words = text.split()
    if not words or _BULLET.search(text):
        return False
    lines = sum(1 for line in text.splitlines() if line.strip())
    if 2 * len(_FIELD.findall(text)) >= lines:
        return False
    code = sum(is_code_like(word) and not _NUMBER.match(word) for word in words)
    return code < PROSE_CODE_SHARE * len(words)


#: A header field opening a line: `Name: value`, `Author-email: …`, `Content-Type: …`.
_FIELD = re.compile(r"(?m)^[ \t]*[A-Za-z][\w-]*:[ \t]")


_NUMBER = re.compile(r"^[(\[]?[$\u20ac\u00a3]?\d[\d,]*(?:\.\d+)?%?[)\]]?[.,;:!?]?$")


def holds_no_name(word: str) -> bool:
    """Whether `word` holds what no name can: a digit, or code's punctuation."""
    return _NOT_IN_NAMES.search(word) is not None


def has_version(text: str) -> bool:
    """Whether `text` holds a dotted version number."""
    return _VERSION_PARTS.search(text) is not None
