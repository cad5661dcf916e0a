"""Layer norms computed in the prologue of the matmul that alone reads them (lowering/
tile_fuse_matmul_prologues.py) against eager: rows normalized on chip, weight and bias applied per partition as the transposes
leave PSUM. Cases cover K a multiple of the 128-row tile or not (a partial last K tile), K below one tile,
either affine parameter absent, bf16 and fp32, a 3-d input seen through a view, and the cases that must not
fuse or must fall back to the layer norm's own nest (a second user of the normalized rows, a single row, whose
A is not transposed on TensorE, and a consumer that is not a matmul).

Shapes avoid multiples of the tile sizes where they can (128 partitions, 512-wide PSUM banks).
"""

import pytest
import torch
import torch.nn.functional as F
from support.compiled import check_compiled


def _ln_linear(dtype: torch.dtype, weight: bool = True, bias: bool = True):
    def fn(x, gamma, beta, w, b):
        normalized = F.layer_norm(
            x.to(dtype), x.shape[-1:], gamma.to(dtype) if weight else None, beta.to(dtype) if bias else None
        )
        return F.linear(normalized, w.to(dtype), b.to(dtype))

    return fn


def _inputs(rows: tuple[int, ...], k: int, n: int) -> list[torch.Tensor]:
    torch.manual_seed(0)
    return [
        torch.randn(*rows, k) * 3 + 1,
        torch.randn(k) * 0.5 + 1,
        torch.randn(k) * 0.5,
        torch.randn(n, k) / k**0.5,
        torch.randn(n),
    ]


CASES = [
    ("bf16_k768", torch.bfloat16, True, True, (1, 300), 768, 530),
    ("bf16_k200_partial_tile", torch.bfloat16, True, True, (2, 65), 200, 300),
    ("fp32_k200", torch.float32, True, True, (130,), 200, 70),
    ("bf16_k64_below_one_tile", torch.bfloat16, True, True, (130,), 64, 129),
    ("bf16_weight_only", torch.bfloat16, True, False, (130,), 256, 129),
    ("bf16_bias_only", torch.bfloat16, False, True, (130,), 256, 129),
    ("bf16_no_affine", torch.bfloat16, False, False, (130,), 300, 129),
    ("bf16_single_row", torch.bfloat16, True, True, (1,), 384, 130),
]


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize(("name", "dtype", "weight", "bias", "rows", "k", "n"), CASES, ids=[case[0] for case in CASES])
def test_layer_norm_into_linear(name, dtype, weight, bias, rows, k, n):
    check_compiled(_ln_linear(dtype, weight, bias), *_inputs(rows, k, n))


def _second_user(x, gamma, beta, w, b):
    normalized = F.layer_norm(x.bfloat16(), x.shape[-1:], gamma.bfloat16(), beta.bfloat16())
    return F.linear(normalized, w.bfloat16(), b.bfloat16()), normalized


def _not_a_matmul(x, gamma, beta, w, b):
    normalized = F.layer_norm(x.bfloat16(), x.shape[-1:], gamma.bfloat16(), beta.bfloat16())
    return torch.relu(normalized) @ w.bfloat16().t()


def _transposed_use(x, gamma, beta, w, b):
    normalized = F.layer_norm(x, x.shape[-1:], gamma, beta)
    return w @ normalized.t()  # the normalized rows are B here, not A


@pytest.mark.usefixtures("fresh_compiler")
@pytest.mark.parametrize("fn", [_second_user, _not_a_matmul, _transposed_use])
def test_layer_norm_not_fused(fn):
    check_compiled(fn, *_inputs((130,), 200, 70))
