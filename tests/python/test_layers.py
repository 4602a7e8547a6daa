"""`layers` pass kernels' Hub layer checks and replace forwards through `kernels.kernelize`."""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import kernels
from kernels import LocalLayerRepository, Mode, kernelize, use_kernel_forward_from_hub, use_kernel_mapping

from conftest import REPO_ROOT
import reference as ref


class _Loaded:
    """A layer repository over an already loaded kernel module (the cpu variant: kernels'
    LocalLayerRepository picks the variant of torch's own backend)."""

    def __init__(self, mod, layer_name):
        self._mod = mod
        self.layer_name = layer_name

    def load(self):
        return getattr(self._mod.layers, self.layer_name)


def repo(lk, layer_name):
    if lk.backend == "cuda":
        return LocalLayerRepository(repo_path=REPO_ROOT, layer_name=layer_name)
    return _Loaded(lk.mod, layer_name)


@use_kernel_forward_from_hub("RMSNorm")
class RMSNorm(nn.Module):
    def __init__(self, dim, eps, affine=True):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.randn(dim)) if affine else None

    def forward(self, hidden_states):
        return F.rms_norm(hidden_states, hidden_states.shape[-1:], self.weight, self.eps)


@use_kernel_forward_from_hub("GELUTanh")
class GELUTanh(nn.Module):
    def forward(self, input):
        return F.gelu(input, approximate="tanh")


class Block(nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.norm = RMSNorm(dim, 1e-6)
        self.norm_plain = RMSNorm(dim, 1e-6, affine=False)
        self.act = GELUTanh()

    def forward(self, x):
        return self.act(self.norm_plain(self.norm(x)))


@pytest.mark.parametrize("mode", [Mode.INFERENCE, Mode.INFERENCE | Mode.TORCH_COMPILE])
def test_kernelize_swaps_in_the_kernel_layers(lk, mode):
    model = Block(256).to(lk.device)
    x = torch.randn(3, 5, 256, device=lk.device)
    expected = model(x)
    mapping = {
        "RMSNorm": {lk.backend: repo(lk, "RMSNorm")},
        "GELUTanh": {lk.backend: repo(lk, "GELUTanh")},
    }
    with use_kernel_mapping(mapping, inherit_mapping=False):
        kernelize(model, mode=mode, device=lk.backend, use_fallback=False)
    assert model.norm.forward.__func__ is lk.mod.layers.RMSNorm.forward
    assert model.act.forward.__func__ is lk.mod.layers.GELUTanh.forward
    torch.testing.assert_close(model(x), expected, atol=5e-5, rtol=5e-5)


def test_training_mode_falls_back_to_the_original_forward(lk):
    model = Block(64).to(lk.device)
    with use_kernel_mapping({"RMSNorm": {lk.backend: repo(lk, "RMSNorm")}}, inherit_mapping=False):
        kernelize(model, mode=Mode.TRAINING, device=lk.backend)
    assert model.norm.forward.__func__ is not lk.mod.layers.RMSNorm.forward


def test_rms_norm_layer_reads_eps_or_variance_epsilon_and_optional_bias(lk):
    class HFStyle(nn.Module):
        def __init__(self):
            super().__init__()
            self.variance_epsilon = 1e-3
            self.weight = nn.Parameter(torch.randn(128))

    class WithBias(nn.Module):
        def __init__(self):
            super().__init__()
            self.eps = 1e-5
            self.weight = nn.Parameter(torch.randn(128))
            self.bias = nn.Parameter(torch.randn(128))

    x = torch.randn(4, 128, device=lk.device)
    hf = HFStyle().to(lk.device)
    got = lk.mod.layers.RMSNorm.forward(hf, x)
    torch.testing.assert_close(got.double(), ref.rms_norm(x, hf.weight.detach(), 1e-3), atol=5e-5, rtol=5e-5)
    wb = WithBias().to(lk.device)
    got = lk.mod.layers.RMSNorm.forward(wb, x)
    expected = ref.rms_norm(x, wb.weight.detach(), 1e-5) + wb.bias.detach().double()
    torch.testing.assert_close(got.double(), expected, atol=5e-5, rtol=5e-5)


def test_layers_have_no_state_of_their_own(lk):
    for cls in (lk.mod.layers.RMSNorm, lk.mod.layers.GELU, lk.mod.layers.GELUTanh):
        assert cls.__init__ is nn.Module.__init__
        assert cls.has_backward is False and cls.can_torch_compile is True
