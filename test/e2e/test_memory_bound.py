"""The on-chip forms of memory-bound kernels against eager: softmax and layer norm in one pass per row tile (and
their fallbacks for rows too long for SBUF), at the edges of tiling (one row, a partial last row tile, odd widths),
in fp32 and bf16, with and without affine parameters."""

import pytest
import torch
from support.compiled import check_compiled

pytestmark = pytest.mark.usefixtures("fresh_compiler")

BF16 = torch.bfloat16


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((1, 4097), BF16), ((130, 2050), torch.float32), ((3, 129, 4096), BF16), ((2, 30000), BF16)],
    ids=["one-row-odd-bf16", "partial-tile-f32", "3d-bf16", "long-rows-bf16"],
)
def test_softmax_rows(shape, dtype):
    torch.manual_seed(11)
    x = (torch.randn(shape) * 3).to(dtype)
    check_compiled(lambda t: (torch.softmax(t, -1), torch.log_softmax(t, -1), torch.softmax(t, 0)), x)


@pytest.mark.parametrize(
    ("shape", "dtype", "affine"),
    [
        ((1, 4097), BF16, False),
        ((130, 2050), torch.float32, True),
        ((2, 65, 3, 11), BF16, True),
        ((5, 40000), torch.float32, False),
    ],
    ids=["one-row-odd-bf16", "partial-tile-f32-affine", "two-dims-bf16-affine", "long-rows-f32"],
)
def test_layer_norm_rows(shape, dtype, affine):
    torch.manual_seed(12)
    normalized = shape[-2:] if len(shape) == 4 else shape[-1:]
    x = (torch.randn(shape) * 2 + 1).to(dtype)
    w = (torch.randn(normalized) + 1).to(dtype) if affine else None
    b = torch.randn(normalized).to(dtype) if affine else None
    check_compiled(lambda t: torch.nn.functional.layer_norm(t, normalized, w, b, 1e-5), x)


def test_layer_norm_saved_statistics():
    torch.manual_seed(13)
    x = torch.randn(129, 33).to(BF16)
    check_compiled(lambda t: torch.ops.aten.native_layer_norm(t, [33], None, None, 1e-5), x)
