"""The digest a kernel's compiled programs are cached under covers the user code the kernel reaches."""

import importlib.util
import sys

import neuron_mlir.nki as nki
from neuron_mlir.nki.source_digest import source_digest

KERNEL_MODULE = """
import neuron_mlir.nki as nki
import neuron_mlir.nki.language as nl

ROWS = {rows}
UNUSED = {unused}


def scale_of(x):
    return {scale}


def unrelated():
    return {unrelated}


def _store_scaled(out, tile):
    nl.store(out, nl.multiply(tile, scale_of(tile)))


@nki.jit
def kernel(x):
    out = nl.ndarray(x.shape, x.dtype, buffer=nl.shared_hbm)
    _store_scaled(out, nl.load(x[0:ROWS, :]))
    return out
"""


def _load(tmp_path, name, **values):
    settings = {"rows": 128, "unused": 1, "scale": 2.0, "unrelated": 0} | values
    directory = tmp_path / name
    directory.mkdir()
    path = directory / "digest_kernel.py"
    path.write_text(KERNEL_MODULE.format(**settings))
    spec = importlib.util.spec_from_file_location("digest_kernel", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.pop("digest_kernel", None)
    spec.loader.exec_module(module)
    return module.kernel


def test_functions_and_constants_the_kernel_reaches_change_the_digest(tmp_path):
    base = source_digest(_load(tmp_path, "base").function)
    assert source_digest(_load(tmp_path, "same").function) == base
    # what the kernel reaches: a function two calls down, the one calling it, a module constant it reads
    assert source_digest(_load(tmp_path, "scale", scale=3.0).function) != base
    assert source_digest(_load(tmp_path, "rows", rows=64).function) != base
    # what it does not reach
    assert source_digest(_load(tmp_path, "unrelated", unrelated=5).function) == base
    assert source_digest(_load(tmp_path, "unused", unused=7).function) == base


def test_the_kernel_calls_fingerprint_is_the_digest_with_its_options(tmp_path):
    kernel = _load(tmp_path, "base")
    call = nki.KernelCall("test::digest", kernel, ("x",), ("x",), {})
    again = nki.KernelCall("test::digest", _load(tmp_path, "again"), ("x",), ("x",), {})
    assert call.fingerprint == again.fingerprint
    seeded = nki.KernelCall("test::digest", nki.jit(kernel.function, seed=5), ("x",), ("x",), {})
    assert seeded.fingerprint != call.fingerprint


def test_the_standard_library_is_left_out_and_installed_packages_are_user_code():
    import json

    import pytest

    from neuron_mlir.nki import language
    from neuron_mlir.nki.source_digest import _is_user_function

    assert not _is_user_function(json.dumps)
    assert not _is_user_function(language.load)  # the compiler's own: its fingerprint covers it
    assert _is_user_function(pytest.approx)
