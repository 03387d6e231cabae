"""Structural pattern matching (``match`` statements)."""

from __future__ import annotations

from typing import Any

from thunder.interpreter.vm.dispatch import handles

_TPFLAGS_SEQUENCE = 1 << 5
_TPFLAGS_MAPPING = 1 << 6
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


@handles("GET_LEN")
def get_len(frame: Any, op: Any) -> None:
    frame.stack.append(len(frame.stack[-1]))


@handles("MATCH_MAPPING")
def match_mapping(frame: Any, op: Any) -> None:
    frame.stack.append(bool(type(frame.stack[-1]).__flags__ & _TPFLAGS_MAPPING))


@handles("MATCH_SEQUENCE")
def match_sequence(frame: Any, op: Any) -> None:
    frame.stack.append(bool(type(frame.stack[-1]).__flags__ & _TPFLAGS_SEQUENCE))


@handles("MATCH_KEYS", since=(3, 11))
def match_keys(frame: Any, op: Any) -> None:
    keys = frame.stack[-1]
    subject = frame.stack[-2]
    frame.stack.append(_match_keys(subject, keys))


@handles("MATCH_KEYS", until=(3, 10))
def match_keys_310(frame: Any, op: Any) -> None:
    values = _match_keys(frame.stack[-2], frame.stack[-1])
    frame.stack.extend((values, values is not None))  # 3.10 also pushes whether it matched


@handles("COPY_DICT_WITHOUT_KEYS", until=(3, 10))
def copy_dict_without_keys(frame: Any, op: Any) -> None:
    """``{**rest}`` of a mapping pattern: the subject's items whose keys the pattern did not name."""
    keys = frame.stack[-1]
    rest = dict(frame.stack[-2])
    for key in keys:
        del rest[key]
    frame.stack[-1] = rest


def _match_keys(subject: Any, keys: tuple) -> tuple | None:
    if not keys:
        return ()
    missing = object()
    get = subject.get
    seen = set()
    values = []
    for key in keys:
        if key in seen:
            raise ValueError(f"mapping pattern checks duplicate key ({key!r})")
        seen.add(key)
        value = get(key, missing)
        if value is missing:
            return None
        values.append(value)
    return tuple(values)


@handles("MATCH_CLASS", since=(3, 11))
def match_class(frame: Any, op: Any) -> None:
    stack = frame.stack
    names = stack.pop()
    cls = stack.pop()
    subject = stack.pop()
    stack.append(_match_class(subject, cls, op.arg, names))


@handles("MATCH_CLASS", until=(3, 10))
def match_class_310(frame: Any, op: Any) -> None:
    stack = frame.stack
    names = stack.pop()
    cls = stack.pop()
    subject = stack.pop()
    attributes = _match_class(subject, cls, op.arg, names)
    # 3.10 leaves the subject where a failed match has no attributes, and pushes whether it matched
    stack.extend((subject if attributes is None else attributes, attributes is not None))


def _match_class(subject: Any, cls: Any, positional_count: int, names: tuple) -> tuple | None:
    if not isinstance(cls, type):
        raise TypeError("called match pattern must be a class")
    if not isinstance(subject, cls):
        return None
    attributes: list[Any] = []
    if positional_count:
        match_args = getattr(cls, "__match_args__", None)
        if match_args is None and isinstance(subject, _SELF_MATCHING) and cls in _SELF_MATCHING:
            if positional_count > 1:
                raise TypeError(
                    f"{cls.__name__}() accepts 1 positional sub-pattern ({positional_count} given)"
                )
            attributes.append(subject)
            positional_names: tuple = ()
        else:
            match_args = () if match_args is None else match_args
            if type(match_args) is not tuple:
                raise TypeError(
                    f"{cls.__name__}.__match_args__ must be a tuple (got {type(match_args).__name__})"
                )
            if positional_count > len(match_args):
                raise TypeError(
                    f"{cls.__name__}() accepts {len(match_args)} positional sub-pattern"
                    f"{'' if len(match_args) == 1 else 's'} ({positional_count} given)"
                )
            positional_names = match_args[:positional_count]
        all_names = positional_names + names
    else:
        all_names = names
    if len(set(all_names)) != len(all_names):
        duplicate = next(name for name in all_names if all_names.count(name) > 1)
        raise TypeError(f"{cls.__name__}() got multiple sub-patterns for attribute {duplicate!r}")
    missing = object()
    for name in all_names:
        value = getattr(subject, name, missing)
        if value is missing:
            return None
        attributes.append(value)
    return tuple(attributes)
