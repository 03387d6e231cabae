"""The on-disk cache: what the transforms made of a computation, kept across processes.

A second process runs the frontend (the interpreter, which also builds the prologue that guards the
call) as the first did, and then, instead of the transforms, executors and autograd, loads what
they produced from ``THUNDER_CACHE_DIR`` (``~/.cache/thunder`` by default). Codegen then compiles
the loaded traces as it compiles fresh ones.

**Never stale.** An entry's key is a hash of everything the work after the frontend reads:

- the frontend's computation trace, serialized whole (every bound symbol, its arguments, outputs
  and decomposition, every proxy's fields, the trace's bookkeeping of in-place updates and
  ``.grad``); symbols and executors are serialized as the names they are registered under, checked
  to give back the very object;
- the compile settings (executors, with their versions and their implementation tables, options,
  grad mode) and the gradient rules;
- the code all of it refers to: the contents of thunder's source files, the torch, Python and
  Triton/nvFuser versions, and for any other module a class or function of the trace comes from,
  that module's file contents; the CUDA device and the ``THUNDER_*``/``TRITON_*``/``NVFUSER_*``
  environment variables.

What cannot be serialized this way (a tensor baked into a trace, an object of a class thunder does
not know, a closure, a user transform) is simply not cached; ``CompileStats.disk_cache_skip_reason``
says why. An entry file holds a checksum and is written to a temporary name and renamed, so that a
partial or corrupt file (or one a concurrent writer is writing) is never read as an entry; an entry
that fails to load is a miss. Entries are pickles: anyone who can write the folder can run code in
the processes that read it, as with Triton's and torch.compile's caches.
"""

from __future__ import annotations

import contextlib
import enum
import functools
import hashlib
import importlib
import io
import logging
import os
import pickle
import shutil
import sys
import tempfile
import time
import types
from collections.abc import Callable
from typing import Any

import torch

__all__ = [
    "CACHE_DIR_VARIABLE",
    "DISABLE_VARIABLE",
    "cache_dir",
    "clear_cache",
    "enabled",
    "entry_key",
    "load_or_compile",
    "NotCacheable",
    "write_atomically",
]

CACHE_DIR_VARIABLE = "THUNDER_CACHE_DIR"
DISABLE_VARIABLE = "THUNDER_DISK_CACHE"  # "0": no disk cache
SIZE_VARIABLE = "THUNDER_CACHE_SIZE_MB"
DEFAULT_SIZE_MB = 2048
FORMAT = b"thunder-disk-cache-1\n"
# Options that change what a compile reports, not what it makes: not part of the key.
_DIAGNOSTIC_OPTIONS = frozenset({"save_traces", "progress_threshold", "disk_cache"})
_ENV_PREFIXES = ("THUNDER_", "TRITON_", "NVFUSER_", "PYTORCH_NVFUSER")
_ENV_IGNORED = frozenset({CACHE_DIR_VARIABLE, DISABLE_VARIABLE, SIZE_VARIABLE, "THUNDER_LOGS", "THUNDER_SAVE_TRACES",
                          "THUNDER_PROGRESS_THRESHOLD", "THUNDER_FULL_TRACEBACK", "TRITON_CACHE_DIR",
                          "THUNDER_NVFUSER_KERNEL_DB"})  # fmt: skip

log = logging.getLogger("thunder.disk_cache")


class NotCacheable(Exception):
    """Something an entry or its key depends on cannot be serialized soundly; the message says what."""


def cache_dir() -> str:
    """The folder of the on-disk cache: ``THUNDER_CACHE_DIR``, else ``~/.cache/thunder``."""
    folder = os.environ.get(CACHE_DIR_VARIABLE)
    if folder:
        return os.path.abspath(os.path.expanduser(folder))
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "thunder")


def enabled(option: bool | None) -> bool:
    """The ``disk_cache`` option when given, else on unless ``THUNDER_DISK_CACHE=0``."""
    if option is not None:
        return option
    return os.environ.get(DISABLE_VARIABLE, "1").strip().lower() not in ("0", "false", "off", "no")


def clear_cache() -> None:
    """Delete the on-disk cache (``THUNDER_CACHE_DIR``): thunder's entries and Triton's kernels
    kept there. Jitted functions keep what they already compiled in memory."""
    shutil.rmtree(cache_dir(), ignore_errors=True)


# ---------------------------------------------------------------------------------------------
# Serialization: thunder's objects by value, registered symbols and executors by name, code by
# reference; anything else is refused.


def _safe_by_value(obj: Any) -> bool:
    module = type(obj).__module__ or ""
    return module.split(".")[0] == "thunder" and not isinstance(obj, types.ModuleType)


_TORCH_VALUES = (torch.dtype, torch.device, torch.Size, torch.memory_format, torch.layout)


class _Pickler(pickle.Pickler):
    """Pickles traces and what they hold. ``references`` collects the modules of the code referred
    to by name (functions, classes), whose contents the key must cover."""

    def __init__(self, file: io.BytesIO):
        super().__init__(file, protocol=pickle.HIGHEST_PROTOCOL)
        self.references: set[str] = set()
        self.may_index = [True]

    def reducer_override(self, obj: Any) -> Any:
        from thunder.core import dtypes
        from thunder.core.executor import Executor
        from thunder.core.symbol import Symbol
        from thunder.core.trace import Trace

        if isinstance(obj, (type, types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                            types.WrapperDescriptorType, types.MethodWrapperType)):  # fmt: skip
            self.references.add(getattr(obj, "__module__", None) or "builtins")
            return NotImplemented  # pickled by its qualified name, which pickle checks gives back ``obj``
        if type(obj) is Trace:
            return _new_trace, (), _trace_state(obj), None, None, _set_trace_state
        if isinstance(obj, Symbol):
            reference = _symbol_reference(obj, self.may_index)
            if reference is not None:
                self.references.add(
                    reference[0] if reference[0] != "executor" else type(obj.executor).__module__
                )
                return _resolve_symbol, reference
            return NotImplemented  # a symbol made for this trace (a fusion region): by value
        if isinstance(obj, Executor):
            from thunder.core.executor import get_executor

            with contextlib.suppress(Exception):
                if get_executor(obj.name) is obj:
                    self.references.add(type(obj).__module__)  # its code joins the key
                    return _executor_named, (obj.name,)
            raise NotCacheable(f"the executor {obj.name!r}, which is not registered under its name")
        if isinstance(obj, dtypes.dtype):
            return getattr, (dtypes, obj.name)
        if isinstance(obj, enum.Enum):
            self.references.add(type(obj).__module__)
            return NotImplemented
        if isinstance(obj, types.ModuleType):
            self.references.add(obj.__name__)
            return importlib.import_module, (obj.__name__,)
        if isinstance(obj, _TORCH_VALUES) or type(obj) in (slice, type(Ellipsis), complex, range):
            return NotImplemented
        if isinstance(obj, torch.Tensor):
            raise NotCacheable(
                "a tensor held by the trace (its identity or data would be baked into the entry)"
            )
        if _safe_by_value(obj):
            return NotImplemented
        raise NotCacheable(f"an object of type {type(obj).__module__}.{type(obj).__qualname__}")


# Trace attributes used only while the frontend traces (callbacks into the interpreter, ids of
# bound symbols) or made again from the rest (the compiled function): not serialized.
_TRACING_ONLY = {
    "tensor_adopter": None,
    "grad_fetcher": None,
    "backward_freed": set,
    "_python_callable": None,
}


def _trace_state(trace: Any) -> dict:
    state = {k: v for k, v in vars(trace).items() if k not in _TRACING_ONLY}
    # sets as sorted lists: the key must not depend on the process's string hashing
    state["names"] = sorted(trace.names)
    state["early_outputs"] = sorted(trace.early_outputs)
    state["backward_boundaries"] = [sorted(names) for names in trace.backward_boundaries]
    return state


def _new_trace() -> Any:
    from thunder.core.trace import Trace

    return Trace.__new__(Trace)


def _set_trace_state(trace: Any, state: dict) -> None:
    trace.__dict__.update(state)
    trace.names, trace.early_outputs = set(state["names"]), set(state["early_outputs"])
    trace.backward_boundaries = [frozenset(names) for names in state["backward_boundaries"]]
    for name, default in _TRACING_ONLY.items():
        setattr(trace, name, default() if default is not None else None)


def _dumps(obj: Any) -> tuple[bytes, set[str]]:
    buffer = io.BytesIO()
    pickler = _Pickler(buffer)
    try:
        pickler.dump(obj)
    except NotCacheable:
        raise
    except (pickle.PicklingError, TypeError, AttributeError, RecursionError) as error:
        raise NotCacheable(f"{type(error).__name__}: {error}") from None
    return buffer.getvalue(), pickler.references


# Where registered symbols live: (module, attribute, key or None) by id(symbol), rebuilt on a miss.
_symbol_index: dict[int, tuple] = {}


def _index_symbols() -> None:
    from thunder.core.symbol import Symbol

    for name, module in list(sys.modules.items()):
        if not name.startswith("thunder.") or module is None:
            continue
        for attribute, value in list(vars(module).items()):
            if isinstance(value, Symbol):
                _symbol_index.setdefault(id(value), (name, attribute, None))
            elif getattr(value, "makes_symbol", False) and value.cache_info().currsize:
                # symbol.made_on_first_use, already made (making one here could register its gradient
                # rule, which the key reads): referred to by its getter
                _symbol_index.setdefault(id(value()), (name, attribute, _MADE_BY_GETTER))
            elif type(value) is dict and len(value) < 10_000:
                for key, item in value.items():
                    if isinstance(item, Symbol) and type(key) is str:
                        _symbol_index.setdefault(id(item), (name, attribute, key))


def _symbol_reference(symbol: Any, may_index: list) -> tuple | None:
    """Where ``symbol`` is registered (an executor's operator, a module's attribute), checked to give
    it back, or None. ``may_index``: non-empty while the modules may be indexed again."""
    executor = symbol.executor
    operators = getattr(executor, "operators", None)
    if isinstance(operators, dict):  # an operator is registered by its name or its printed call
        for name in (symbol.name, symbol.call_name):
            if operators.get(name) is symbol:
                with contextlib.suppress(Exception):
                    if _executor_named(executor.name) is executor:
                        return ("executor", executor.name, name)
    for attempt in range(2):
        reference = _symbol_index.get(id(symbol))
        if reference is not None:
            with contextlib.suppress(Exception):
                if _resolve_symbol(*reference) is symbol:
                    return reference
        if attempt == 0 and may_index:
            may_index.clear()  # indexed again at most once per serialization: fusion regions' symbols
            _symbol_index.clear()  # are made per compile and never found; each would rescan
            _index_symbols()
    return None


_MADE_BY_GETTER = "()"  # the key of a reference to a symbol that its getter makes on first use


def _resolve_symbol(module: str, attribute: str, key: str | None) -> Any:
    from thunder.core.symbol import Symbol

    if module == "executor":
        symbol = _executor_named(attribute).operators[key]
    else:
        value = getattr(importlib.import_module(module), attribute)
        symbol = value() if key == _MADE_BY_GETTER else value if key is None else value[key]
    if not isinstance(symbol, Symbol):  # a global not made yet in this process: the entry is a miss
        raise LookupError(f"{module}.{attribute}[{key!r}] is {symbol!r} here, not a symbol")
    return symbol


def _executor_named(name: str) -> Any:
    from thunder.core.executor import get_executor

    return get_executor(name)


# ---------------------------------------------------------------------------------------------
# The key


@functools.lru_cache(maxsize=1)
def _thunder_sources() -> str:
    """A hash of every Python file of the thunder packages (editable installs change no version)."""
    digest = hashlib.sha256()
    for folder in sorted(set(sys.modules["thunder"].__path__)):  # every package's portion of the namespace
        for root, dirs, files in os.walk(folder):
            dirs.sort()
            for name in sorted(files):
                if name.endswith(".py"):
                    path = os.path.join(root, name)
                    digest.update(os.path.relpath(path, folder).encode())
                    with open(path, "rb") as file:
                        digest.update(file.read())
    return digest.hexdigest()


_file_hashes: dict[tuple[str, int, int], str] = {}


def _module_fingerprint(module_name: str) -> str:
    """What stands for the code of ``module_name`` in the key: a version, or its file's contents."""
    root = module_name.split(".")[0]
    if root == "thunder":
        return "thunder sources"  # _thunder_sources() is part of every key
    if root in ("torch", "torchgen"):
        return f"torch {torch.__version__}"
    if root in sys.stdlib_module_names or root == "builtins":
        return "python"
    module = sys.modules.get(module_name)
    path = getattr(module, "__file__", None)
    if not path or not os.path.isfile(path):
        raise NotCacheable(f"code of the module {module_name!r}, which has no source file to fingerprint")
    stat = os.stat(path)
    cached = _file_hashes.get((path, stat.st_mtime_ns, stat.st_size))
    if cached is None:
        with open(path, "rb") as file:
            cached = hashlib.sha256(file.read()).hexdigest()
        _file_hashes[(path, stat.st_mtime_ns, stat.st_size)] = cached
    return cached


def _distribution_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


@functools.lru_cache(maxsize=1)
def _platform() -> tuple:
    """Versions and the device: what the same trace compiles differently under."""
    versions = tuple((name, _distribution_version(name)) for name in ("triton", "nvfuser", "nvfuser_direct", "nvfuser-cu128", "nvfuser-cu130"))  # fmt: skip
    return (sys.version, torch.__version__, getattr(torch.version, "git_version", None),
            getattr(torch.version, "cuda", None), versions)  # fmt: skip


def _device() -> tuple:
    if not torch.cuda.is_available():
        return ("no cuda",)
    index = torch.cuda.current_device()
    return (
        torch.cuda.get_device_name(index),
        torch.cuda.get_device_capability(index),
        torch.cuda.device_count(),
    )


def _environment() -> tuple:
    variables = (
        (k, _without_caching_options(k, v))
        for k, v in os.environ.items()
        if k.startswith(_ENV_PREFIXES) and k not in _ENV_IGNORED
    )
    return tuple(sorted((k, v) for k, v in variables if v or k not in _CACHING_OPTIONS))


# Options that only keep compiled binaries on disk, never change them: nvFuser's kernel database,
# which its executor turns on before importing nvFuser (thunder-executors' nvfuser/kernel_db.py).
_CACHING_OPTIONS = {"NVFUSER_ENABLE": frozenset({"kernel_db"})}


def _without_caching_options(variable: str, value: str) -> str:
    dropped = _CACHING_OPTIONS.get(variable)
    if dropped is None:
        return value
    return ",".join(o for o in value.split(",") if o.strip() and o.strip() not in dropped)


def _function_name(fn: Any, modules: set[str]) -> tuple | None:
    """A callable of a table the compile reads, by name; its module's code joins the key."""
    if fn is None:
        return None
    module = getattr(fn, "__module__", None) or type(fn).__module__
    modules.add(module)
    return (module, getattr(fn, "__qualname__", type(fn).__qualname__))


def _executor_description(executor: Any, modules: set[str]) -> tuple:
    """The executor's class, version and what it claims (implementations registered at run time too)."""
    modules.add(type(executor).__module__)
    implementations = getattr(executor, "implementations", {})
    table = tuple(
        (symbol_id, getattr(i.operator, "id", None), _function_name(getattr(i.operator, "fn", None), modules),
         _function_name(i.checker, modules), _function_name(i.execution_transform, modules), i.defers_to_fusion,
         i.beats_fusion)
        for symbol_id, i in sorted(implementations.items())
    )  # fmt: skip
    settings = tuple(
        (name, _setting(value, modules))
        for name, value in sorted(vars(executor).items())
        if name not in ("implementations", "operators", "name", "version")
    )
    return (executor.name, type(executor).__module__, type(executor).__qualname__, str(executor.version), table,
            settings)  # fmt: skip


_PLAIN = (type(None), bool, int, float, str)


def _setting(value: Any, modules: set[str]) -> Any:
    """An executor's attribute as the key sees it: plain data as itself, code by name, else its type."""
    if isinstance(value, _PLAIN):
        return (type(value).__name__, value)
    if isinstance(value, (tuple, list, set, frozenset)) and all(isinstance(v, _PLAIN) for v in value):
        return (
            type(value).__name__,
            sorted(map(repr, value)) if isinstance(value, (set, frozenset)) else list(value),
        )
    if callable(value):
        return _function_name(value, modules)
    return (type(value).__module__, type(value).__qualname__)


def _gradient_rules(modules: set[str]) -> tuple:
    from thunder.core import gradients

    return tuple(
        (symbol_id, _function_name(rule, modules), _function_name(gradients._applies.get(symbol_id), modules))
        for symbol_id, rule in sorted(gradients._vjp_rules.items())
    )


def entry_key(computation: Any, compile_data: Any) -> str:
    """The key of what compiling ``computation`` with ``compile_data`` makes; raises NotCacheable."""
    from thunder.core.compile_transform import compile_transforms
    from thunder.core.symbolic_shapes import has_symbolic_sizes

    if has_symbolic_sizes(computation):
        # the prologue checks what the transforms and executors assumed of the sizes (symbolic_shapes.py):
        # a loaded program would come without those assumptions
        raise NotCacheable("symbolic sizes: the guards the transforms add to them are not stored")
    if compile_data.transforms:
        kind = (
            "compile transforms (thunder.distributed)"
            if compile_transforms(compile_data.transforms)
            else "user transforms"
        )
        raise NotCacheable(f"{kind}: functions whose effect on the trace the key cannot describe")
    modules: set[str] = set()
    options = {k: v for k, v in sorted(compile_data.options.items()) if k not in _DIAGNOSTIC_OPTIONS}
    executors = [_executor_description(e, modules) for e in compile_data.executors]
    settings = (
        executors,
        compile_data.cache_option,
        options,
        torch.is_grad_enabled(),
        str(torch.get_default_dtype()),  # decompositions traced by the executors' pass promote to it
        _gradient_rules(modules),
    )
    trace_bytes, references = _dumps((computation, settings))
    digest = hashlib.sha256(FORMAT)
    digest.update(trace_bytes)
    for module in sorted(references | modules):
        digest.update(f"\n{module}={_module_fingerprint(module)}".encode())
    digest.update(repr((_thunder_sources(), _platform(), _device(), _environment())).encode())
    return digest.hexdigest()


# ---------------------------------------------------------------------------------------------
# Files


def _entry_path(key: str) -> str:
    return os.path.join(cache_dir(), "entries", key[:2], f"{key}.pkl")


def _write(key: str, payload: bytes) -> None:
    """Write atomically: a reader sees a whole entry or none (concurrent writers write equal ones)."""
    path = _entry_path(key)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    write_atomically(path, FORMAT + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)


def write_atomically(path: str, data: bytes) -> None:
    """``data`` into ``path`` through a temporary file beside it, renamed into place: a reader sees
    the old file or the whole new one, never a part."""
    descriptor, temporary = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".tmp-")
    try:
        with os.fdopen(descriptor, "wb") as file:
            file.write(data)
        os.replace(temporary, path)
    except BaseException:
        with contextlib.suppress(OSError):
            os.unlink(temporary)
        raise


def size_limit() -> int:
    """The most bytes of entries kept: ``THUNDER_CACHE_SIZE_MB`` (default 2048) megabytes."""
    try:
        return int(float(os.environ.get(SIZE_VARIABLE, DEFAULT_SIZE_MB)) * 2**20)
    except ValueError:
        return DEFAULT_SIZE_MB * 2**20


def _prune(limit: int) -> None:
    """Past ``limit`` bytes of entries, delete the least recently used down to 3/4 of it. Run after a
    write (only compiles write); a file another process deletes meanwhile is simply gone."""
    entries = []
    with contextlib.suppress(OSError):
        for folder in os.scandir(os.path.join(cache_dir(), "entries")):
            if folder.is_dir():
                for entry in os.scandir(folder.path):
                    with contextlib.suppress(OSError):
                        if entry.name.endswith(".pkl"):
                            status = entry.stat()
                            entries.append((status.st_mtime, status.st_size, entry.path))
    total = sum(size for _, size, _ in entries)
    if total <= limit:
        return
    for _, size, path in sorted(entries):
        with contextlib.suppress(OSError):
            os.unlink(path)
            total -= size
        if total <= limit * 3 // 4:
            return


def _read(key: str) -> Any | None:
    """The entry stored under ``key``, or None when there is none or it is damaged (then removed)."""
    path = _entry_path(key)
    try:
        with open(path, "rb") as file:
            data = file.read()
    except OSError:
        return None
    header_end = len(FORMAT) + 65
    checksum, payload = data[len(FORMAT) : header_end - 1], data[header_end:]
    try:
        if not data.startswith(FORMAT) or hashlib.sha256(payload).hexdigest().encode() != checksum:
            raise ValueError("bad header or checksum")
        loaded = pickle.loads(payload)
        with contextlib.suppress(OSError):
            os.utime(path)  # its time is its last use: the least recently used go first (_prune)
        return loaded
    except Exception as error:  # damaged, or written by code that no longer loads: a miss
        log.debug("disk cache: ignoring the damaged entry %s (%s: %s)", path, type(error).__name__, error)
        with contextlib.suppress(OSError):
            os.unlink(path)
        return None


def load_or_compile(computation: Any, compile_data: Any, stats: Any, compile: Callable[[], Any]) -> Any:
    """What ``compile()`` makes of ``computation``: loaded from the disk cache when an entry has the
    key of ``computation`` and ``compile_data``, else made by ``compile()`` and stored."""
    compile_data.used_options.add("disk_cache")
    if not enabled(compile_data.options.get("disk_cache")):
        return compile()
    start = time.perf_counter()
    try:
        key = entry_key(computation, compile_data)
    except NotCacheable as reason:
        return _skip(stats, f"the computation: {reason}", compile)
    loaded = _read(key)
    if loaded is not None:
        stats.disk_cache_hits += 1
        stats.last_stage_seconds["disk cache load"] = time.perf_counter() - start
        log.debug("disk cache: hit %s", key)
        return loaded
    stats.disk_cache_misses += 1
    stats.last_stage_seconds["disk cache key"] = time.perf_counter() - start
    made = compile()
    start = time.perf_counter()
    try:
        payload, _ = _dumps(made)
        _write(key, payload)
        stats.disk_cache_writes += 1
        _prune(size_limit())
    except NotCacheable as reason:
        stats.disk_cache_skip_reason = f"what the transforms made: {reason}"
        log.debug("disk cache: not stored: %s", stats.disk_cache_skip_reason)
    except OSError as error:
        stats.disk_cache_skip_reason = f"cannot write {cache_dir()}: {error}"
        log.debug("disk cache: not stored: %s", stats.disk_cache_skip_reason)
    stats.last_stage_seconds["disk cache store"] = time.perf_counter() - start
    return made


def _skip(stats: Any, reason: str, compile: Callable[[], Any]) -> Any:
    stats.disk_cache_skips += 1
    stats.disk_cache_skip_reason = reason
    log.debug("disk cache: not cached: %s", reason)
    return compile()
