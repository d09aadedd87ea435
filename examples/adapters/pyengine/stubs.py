"""Import stubs for the heavy packages a server's wheel imports but its tool parsers never use.

A server package (vLLM, SGLang) imports torch, transformers, numpy… at module level all the way
down from its tool-parser modules, though parsing text never touches them. `install(roots)`
puts a finder first on `sys.meta_path` that answers every import of those packages (and of any
dotted module name given, such as one of the server's own GPU-bound subpackages) with a module
whose every attribute is a permissive stand-in: callable, subscriptable, usable as a base class,
a decorator or a pydantic field type. Nothing the parsers actually compute goes through a stub:
a parser that did would fail its replays loudly (an adapter `error`), not quietly.
"""

import importlib.abc
import importlib.machinery
import importlib.metadata
import sys
import types


class _Stub(type):
    """The metaclass of every stand-in: any attribute, call or subscript gives another one."""

    def __getattr__(cls, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return _make(f"{cls.__name__}.{name}")

    def __call__(cls, *args, **kwargs):
        # Used as a decorator (`@torch.inference_mode`, `@lru_cache`-like): keep the function.
        if len(args) == 1 and callable(args[0]) and not kwargs:
            return args[0]
        return _make(cls.__name__ + "()")

    def __getitem__(cls, key):
        return cls

    def __or__(cls, other):
        return cls

    def __ror__(cls, other):
        return cls

    def __iter__(cls):
        return iter(())

    def __bool__(cls):
        return False

    def __len__(cls):
        return 0

    def __mro_entries__(cls, bases):
        return (_StubBase,)


class _StubBase:
    """What a class deriving from a stand-in derives from instead."""

    def __init_subclass__(cls, **kwargs):
        pass

    def __init__(self, *args, **kwargs):
        pass

    @classmethod
    def __get_pydantic_core_schema__(cls, source, handler):
        from pydantic_core import core_schema

        return core_schema.any_schema()


def _make(name):
    return _Stub(name, (_StubBase,), {})


class _StubModule(types.ModuleType):
    def __getattr__(self, name):
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = _make(f"{self.__name__}.{name}")
        setattr(self, name, value)
        return value


class _Finder(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    def __init__(self, roots):
        self.roots = set(roots)

    def find_spec(self, fullname, path, target=None):
        parts = fullname.split(".")
        if any(".".join(parts[:i]) in self.roots for i in range(1, len(parts) + 1)):
            return importlib.machinery.ModuleSpec(fullname, self, is_package=True)
        return None

    def create_module(self, spec):
        module = _StubModule(spec.name)
        module.__path__ = []
        return module

    def exec_module(self, module):
        pass


_VERSIONS = {}
_real_version = importlib.metadata.version


def _version(name):
    key = name.replace("-", "_").lower()
    if key in _VERSIONS:
        return _VERSIONS[key]
    return _real_version(name)


def install(roots, versions=None):
    """Stubs every module under `roots`; `versions` answers `importlib.metadata.version` for
    stubbed distributions whose version a server checks at import time (torch's)."""
    sys.meta_path.insert(0, _Finder(roots))
    _VERSIONS.update({k.replace("-", "_").lower(): v for k, v in (versions or {}).items()})
    importlib.metadata.version = _version


def bare_package(name, path):
    """Makes `name` importable from the directory `path` without running its `__init__.py`
    (a server's top-level `__init__` pulls in its whole engine); its submodules import as usual."""
    module = types.ModuleType(name)
    module.__path__ = [path]
    module.__file__ = f"{path}/__init__.py"
    sys.modules[name] = module
    return module
