"""How a value is kept in the cache: JSON text when JSON gives it back exactly.

diskcache pickles a dict, and unpickling a cached answer was the largest single cost of
reading a million of them back (2.1 µs of the ~12 µs a row of a fully cached re-run);
orjson reads the same answer from JSON text in about half that. So :func:`stored` turns a
value into JSON text where that text reads back as an equal value, and :func:`loaded`
reads it. Writing costs a little more than pickling (1.75 µs an answer against 1.2, timed
alone): the text is parsed once more to check it, which a cold row (~500 µs) does not
feel. Everything else is left to diskcache as
before: bytes (embeddings) stay raw bytes, and a value JSON would change is pickled: a
tuple (JSON has lists), a dict with keys that are not strings, a float that is not finite
(orjson writes NaN as ``null``), an integer wider than 64 bits.

Every text value framekit writes is JSON, so a text value read back is JSON. Caches
written before this change hold pickles, and are read as they were. A text that is not
JSON (no framekit version wrote one) is returned as it is.
"""

from __future__ import annotations

from typing import Any

import orjson

__all__ = ["loaded", "stored"]


def stored(value: Any) -> Any:
    """What the cache keeps for ``value``: its JSON text when reading that text gives an
    equal value back, else ``value`` itself (for diskcache to store as it does).

    Examples
    --------
    >>> stored({"answer": {"label": "relevant"}, "tokens": 12})
    '{"answer":{"label":"relevant"},"tokens":12}'
    >>> stored(b"\\x00\\x01"), stored((1, 2)), stored({"cost": float("nan")})
    (b'\\x00\\x01', (1, 2), {'cost': nan})
    """
    if type(value) is bytes:
        return value
    try:
        text = orjson.dumps(value)
    except TypeError:  # not JSON at all (a set, an object, a key that is no string)
        return value
    # The comparison is what makes the text exact: a NaN written as null, a tuple read
    # back as a list or a str subclass read back as str all compare unequal.
    if orjson.loads(text) != value:
        return value
    return text.decode()


def loaded(value: Any) -> Any:
    """The value a cache entry holds: a text entry read as JSON (what :func:`stored`
    wrote), anything else as diskcache decoded it.

    Examples
    --------
    >>> loaded('{"answer":{"label":"relevant"}}')
    {'answer': {'label': 'relevant'}}
    >>> loaded(stored("plain text")), loaded(b"raw"), loaded("not json")
    ('plain text', b'raw', 'not json')
    """
    if type(value) is not str:
        return value
    try:
        return orjson.loads(value)
    except orjson.JSONDecodeError:
        return value
